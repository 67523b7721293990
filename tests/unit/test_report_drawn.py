"""The report's workload part reads the drawings its models part wrote: a damaged one is refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest
from fabricref.core.paths import Layout
from fabricref.errors import FabricrefError
from fabricref.report.drawn import Drawings


@pytest.mark.parametrize(
    "text", ["", "{", '{"drawing": {}}', '{"drawing": {"topology_id": "t"}, "edges": {}}', '{"edges": []}', "[]"]
)
def test_a_damaged_drawing_file_is_refused_naming_it_and_the_stage_that_writes_it(tmp_path: Path, text: str):
    folder = tmp_path / "registry" / "report" / "drawings"
    folder.mkdir(parents=True)
    (folder / "t.json").write_text(text)
    drawings = Drawings(folder, Layout(tmp_path))
    assert drawings.ids == ["t"]
    with pytest.raises(FabricrefError) as err:
        drawings.loads("t", [("a", "b", 1.0, 0.0)], None)
    assert "registry/report/drawings/t.json" in str(err.value) and "report-models" in str(err.value)
