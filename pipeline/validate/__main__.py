"""`python -m fabricref.validate` (the DVC stage `validate`; people: `fabricref validate`): every published result
in models/validation/ against the model, as the registry table `validation` and registry/validation/metrics.json."""

from ..core.entry import run_stage
from ..core.paths import Layout


def main(lay: Layout) -> str:
    from . import stage

    return stage.run(lay)


run_stage(main)
