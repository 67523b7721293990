"""Hostile input, round 3: numbers too close to 0 (1e-300, subnormals) or too large (1e300) in any knob. One
rule for every number of every validated document, params.yaml included (pipeline/core/schemas.py
`number_problem`): 0, or a magnitude from 1e-12 to 2**53; the error names the file, the line, the knob and
that range."""

from __future__ import annotations

import re

import pytest
from fabricref.errors import FabricrefError

RANGE = r"expected 0, or a magnitude from 1e-12 to 2\*\*53"

# (what params.yaml says, the knob's JSON path there, the reader of it)
KNOBS = [
    ("requests_per_second: 100", "$.workloads.llama70b-serve-aggregated.requests_per_second", "workload"),
    ("memory_headroom: 0.0", "$.step.memory_headroom", "step"),
    ("efficiency: 0.822", "$.calibration.link_classes.nvlink5.efficiency", "calibration"),
    ("chunk_bytes: 524288", "$.calibration.pipeline.chunk_bytes", "calibration"),
    ("endpoint: 2000", "$.topology.latency_ns.endpoint", "topology"),
    ("bandwidth: 64", "$.topology.host_link.bandwidth", "topology"),
]


def read(lay, reader: str) -> None:
    from fabricref.estimate.calibration import load_calibration
    from fabricref.estimate.choices import load_step_choices
    from fabricref.estimate.workloads import find_workload
    from fabricref.topology.facts import defaults

    {
        "workload": lambda: find_workload(lay, "llama70b-serve-aggregated"),
        "step": lambda: load_step_choices(lay.root),
        "calibration": lambda: load_calibration(lay.root),
        "topology": lambda: defaults(lay),
    }[reader]()


@pytest.mark.parametrize("value", ["1e-300", "5e-324", "9.9e-13", "1e300"])
@pytest.mark.parametrize(("text", "path", "reader"), KNOBS, ids=[k[1].rsplit(".", 1)[-1] for k in KNOBS])
def test_a_params_knob_too_close_to_zero_or_too_large_is_refused_naming_file_line_knob_and_range(
    no_sources, text, path, reader, value
):
    """`calibration.pipeline.chunk_bytes: 1e-300` gave "the inputs are too large: a result overflows" naming no
    file or knob; `memory_headroom`, an efficiency, a latency at 1e-300 were taken."""
    params = no_sources.root / "params.yaml"
    old = params.read_text()
    assert text in old
    params.write_text(old.replace(text, f"{text.split(':')[0]}: {value}", 1))
    line = next(i for i, t in enumerate(params.read_text().splitlines(), 1) if f": {value}" in t)
    with pytest.raises(FabricrefError) as caught:
        read(no_sources, reader)
    message = str(caught.value)
    assert re.search(rf"params\.yaml:{line}: at {re.escape(path)}: ", message), message
    assert re.search(RANGE, message), message


def test_a_workload_file_number_too_close_to_zero_is_refused_with_its_line(no_sources):
    from fabricref.estimate.workloads import find_workload

    path = no_sources.root / "models" / "workloads" / "llama70b-serve-aggregated.yaml"
    path.write_text(path.read_text().replace("group_tokens_per_second: 1000", "group_tokens_per_second: 1e-300"))
    line = next(i for i, t in enumerate(path.read_text().splitlines(), 1) if "1e-300" in t)
    with pytest.raises(FabricrefError, match=rf"llama70b-serve-aggregated\.yaml:{line}: at "
                       rf"\$\.inference\.group_tokens_per_second: 1e-300 is too close to 0.*{RANGE}"):  # fmt: skip
        find_workload(no_sources, "llama70b-serve-aggregated")


def test_a_topology_default_set_in_params_yaml_is_named_there_not_in_defaults_yaml(no_sources):
    """A value params.yaml sets and defaults.yaml's schema refuses (`scale_up: 0`, the minimum is exclusive)
    was reported at models/topology/defaults.yaml, where it is not written."""
    from fabricref.topology.facts import defaults

    params = no_sources.root / "params.yaml"
    params.write_text(params.read_text().replace("scale_up: 300", "scale_up: 0", 1))
    line = next(i for i, t in enumerate(params.read_text().splitlines(), 1) if "scale_up: 0" in t)
    with pytest.raises(
        FabricrefError,
        match=rf"params\.yaml:{line}: at \$\.topology\.latency_ns\.scale_up: Input should be greater than 0 \(got 0\)",
    ):
        defaults(no_sources)


def test_an_inference_knob_of_the_wrong_type_is_named_at_its_params_line(no_sources):
    """`tp: 1.0` for an inference workload was reported at the workload file's line 1 as `$.tp` (the union's tag
    `inference` and the key `inference` were both dropped from the path)."""
    from fabricref.estimate.workloads import find_workload

    params = no_sources.root / "params.yaml"
    text = params.read_text()
    start = text.index("llama70b-serve-aggregated:")
    params.write_text(text[:start] + text[start:].replace("tp: 8", "tp: 1.5", 1))
    line = next(i for i, t in enumerate(params.read_text().splitlines(), 1) if "tp: 1.5" in t)
    with pytest.raises(FabricrefError, match=rf"params\.yaml:{line}: at \$\.workloads\.llama70b-serve-aggregated\.tp"):
        find_workload(no_sources, "llama70b-serve-aggregated")
