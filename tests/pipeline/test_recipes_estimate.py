"""docs/development.md's recipe "add a collective algorithm" runs as written: its cost function and registry entry
join the registry, its calibration entry loads, and the figures it states come out."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from fabricref.errors import UsageError
from fabricref.estimate import collectives
from fabricref.estimate.calibration import CALIBRATION_PATH, load_calibration_file, standalone_text

ROOT = Path(__file__).resolve().parents[2]
GIB = 1 << 30


def _blocks(section: str, language: str) -> list[str]:
    text = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    body = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{language}\n(.*?)```", body, flags=re.S)


@pytest.fixture
def rabenseifner(monkeypatch: pytest.MonkeyPatch) -> collectives.Algorithm:
    """The recipe's cost function and registry entry, registered for this test only."""
    function, entry, _ = _blocks("Recipe: add a collective algorithm", "python")
    namespace = dict(vars(collectives))
    exec(function, namespace)
    algorithm = eval(entry, namespace)
    monkeypatch.setitem(collectives.ALGORITHMS, algorithm.name, algorithm)
    return algorithm


def test_the_recipe_s_own_test_passes(rabenseifner):
    test = _blocks("Recipe: add a collective algorithm", "python")[2]
    namespace = {"parametric": collectives.parametric, "GIB": GIB, "pytest": pytest, "UsageError": UsageError}
    exec(test, namespace)
    namespace["test_rabenseifner_by_hand"]()


def test_the_parametric_command_reports_what_the_recipe_says(rabenseifner, cli):
    args = ["--op", "all-reduce", "--ranks", "8", "--bytes", "1GiB", "--bandwidth", "400Gb/s", "--latency", "5us"]
    r = cli("estimate", "collective", *args, "--algorithm", "rabenseifner", "--json")
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert (d["algorithm"], d["steps"], d["bytes_on_wire_per_rank"]) == ("rabenseifner", 6, 1.75 * GIB)
    assert d["latency_seconds"] == pytest.approx(30e-6)
    assert json.loads(cli("estimate", "collective", *args, "--json").out)["steps"] == 14


def test_its_calibration_entry_costs_it_on_one_dgx_h100_and_it_is_never_chosen_by_itself(rabenseifner, tmp_path):
    (entry,) = _blocks("Recipe: add a collective algorithm", "yaml")
    text = standalone_text(ROOT / CALIBRATION_PATH)
    assert "\npipeline:\n" in text
    path = tmp_path / "collectives.yaml"
    path.write_text(text.replace("\npipeline:\n", f"\n{entry}\npipeline:\n", 1))
    cal = load_calibration_file(path)
    nvlink4 = collectives.Tier("scale_up", "nvlink4", cal.link_classes["nvlink4"], 450e9)
    dgx = collectives.Shape(8, 8, 1, nvlink4, None, nvls=True, one_shot=True)
    c = collectives.estimate(cal, "all-reduce", dgx, GIB, "rabenseifner")
    assert c.latency_seconds == pytest.approx(8.4e-6 + 6 * 3.4e-6)
    assert c.bandwidth_seconds == pytest.approx(1.75 * GIB / (450e9 * 0.822))
    assert c.confidence == "assumed"
    chosen = collectives.estimate(cal, "all-reduce", dgx, GIB)
    assert "rabenseifner" not in {x["algorithm"] for x in chosen.candidates}
    with pytest.raises(UsageError, match="no entry for rabenseifner"):
        collectives.estimate(load_calibration_file(ROOT / CALIBRATION_PATH), "all-reduce", dgx, GIB, "rabenseifner")
