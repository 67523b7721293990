"""The step estimate's choice, from the checkout's params.yaml (`step.memory_headroom`): its one home, so `dvc params
diff` shows it and `dvc exp run -S step.memory_headroom=0.1` reruns exactly the stages that use it. It is an
assumption labelled on every output. Compute throughput is not a choice: it is calibration data with provenance
(models/calibration/throughput.yaml); a removed knob is refused naming what replaced it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from ..core.paths import PARAMS_FILE
from ..core.schemas import _line_of, load_yaml
from ..errors import ValidationError

# What each choice means, and the bounds it must keep.
CHOICES = {"memory_headroom": "the fraction of accelerator memory the fit keeps free (not for the workload), in [0, 1)"}
# Knobs that were removed, and what replaced each (named in the error, so an old params.yaml says what to do).
REMOVED = {
    "mfu": "compute throughput is calibration data now: per accelerator and dtype in models/calibration/"
    "throughput.yaml (each number with its provenance); for a what-if, pass --mfu to `fabricref estimate step`, "
    "which labels every output as given",
}


@dataclass(frozen=True)
class StepChoices:
    memory_headroom: float


def load_step_choices(root: Path) -> StepChoices:
    """`step` of <root>/params.yaml, validated; an error names the file, line and JSON path."""
    path = root / PARAMS_FILE
    if not path.is_file():
        raise ValidationError(f"{path}: not found; it holds the step estimate's choices ({', '.join(CHOICES)})")
    data, doc = load_yaml(path)
    block = data.get("step") if isinstance(data, dict) else None
    if block is None and isinstance(data, dict) and "step" in data:
        # `step:` with every line deleted reads as null: say which choice is missing, not that a mapping is.
        block = {}
    if not isinstance(block, dict):
        raise ValidationError(
            f"{path}:{_line_of(doc, ['step']) or 1}: at $.step: expected a mapping with "
            + "; ".join(f"{k} ({v})" for k, v in CHOICES.items())
        )
    for key in block:
        if key in REMOVED:
            raise ValidationError(
                f"{path}:{_line_of(doc, ['step', key])}: at $.step.{key}: removed: {REMOVED[key]}; delete the line"
            )
        if key not in CHOICES:
            raise ValidationError(
                f"{path}:{_line_of(doc, ['step', key])}: at $.step.{key}: not a choice of the step estimate; "
                f"expected one of {', '.join(CHOICES)}"
            )
    values = {}
    for key, meaning in CHOICES.items():
        if key not in block:
            raise ValidationError(f"{path}:{_line_of(doc, ['step'])}: at $.step: {key} is missing ({meaning})")
        value = block[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            problem = f"expected a number: {meaning}; got {value!r}"
        elif not 0 <= value < 1:
            problem = f"{value!r} is out of range: {meaning}"
        else:
            values[key] = float(value)
            continue
        raise ValidationError(f"{path}:{_line_of(doc, ['step', key])}: at $.step.{key}: {problem}")
    return StepChoices(**values)
