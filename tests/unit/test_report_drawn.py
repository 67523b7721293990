"""The report's workload part reads the drawings its models part wrote: one that is damaged, another topology's,
inconsistent in itself or missing is refused by name, before any page is written."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fabricref.core.paths import Layout
from fabricref.errors import FabricrefError
from fabricref.report.drawn import Drawings
from fabricref.report.stage import _env


def _node(id: str, x: float = 0.0) -> dict[str, Any]:
    return {"id": id, "kind": "accelerator", "label": id, "row": 0, "order": 0.0, "x": x, "w": 10.0, "h": 10.0}


def _link(id: str, source: str, target: str, gbps: float | None = 900.0, members: int = 1) -> dict[str, Any]:
    return {
        "id": id,
        "source": source,
        "target": target,
        "network": "scale_up",
        "gbps": gbps,
        "links": 1,
        "members": members,
        "field": None,
        "status": "published",
        "confidence": "high",
        "shown": {},
    }


def _doc(tid: str = "t") -> dict[str, Any]:
    """A drawing as the models part writes it: two links between three accelerators."""
    drawing = {
        "topology_id": tid,
        "reference": tid,
        "title": tid,
        "level": "full",
        "levels": ["full"],
        "nodes": [_node("a"), _node("b"), _node("c")],
        "links": [_link("l1", "a", "b"), _link("l2", "b", "c")],
        "counts": {"accelerator": 3},
        "width": 100.0,
        "height": 50.0,
        "caveat": "",
    }
    return {"drawing": drawing, "edges": {"l1": [["a", "b", False]], "l2": [["b", "c", False]]}}


def _folder(tmp_path: Path, files: dict[str, str]) -> Path:
    folder = tmp_path / "registry" / "report" / "drawings"
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def _refused(tmp_path: Path, files: dict[str, str], ids: list[str]) -> str:
    folder = _folder(tmp_path, files)
    with pytest.raises(FabricrefError) as err:
        Drawings(folder, Layout(tmp_path), ids, _env())
    message = str(err.value)
    assert "registry/report/drawings/" in message and "report-models" in message, message
    return message


def test_a_drawing_as_the_writer_writes_it_is_read(tmp_path: Path):
    folder = _folder(tmp_path, {"t.json": json.dumps(_doc())})
    drawings = Drawings(folder, Layout(tmp_path), ["t"], _env())
    loads = drawings.loads("t", [("a", "b", 8e9, 0.0), ("b", "c", 0.0, 4e9)], None)
    assert [(x.id, x.bytes, x.share) for x in loads] == [("l1", 8e9, 1.0), ("l2", 4e9, 0.5)]


@pytest.mark.parametrize(
    "text", ["", "{", '{"drawing": {}}', '{"drawing": {"topology_id": "t"}, "edges": {}}', '{"edges": []}', "[]"]
)
def test_a_damaged_drawing_file_is_refused_naming_it_and_the_stage_that_writes_it(tmp_path: Path, text: str):
    _refused(tmp_path, {"t.json": text}, ["t"])


def test_a_missing_drawing_is_refused_not_left_out(tmp_path: Path):
    message = _refused(tmp_path, {"t.json": json.dumps(_doc())}, ["t", "u"])
    assert "drawings/u.json" in message and "file not found" in message
    assert str(tmp_path) not in message  # the checkout's own path, relative


def test_a_dangling_link_is_refused_naming_the_drawing_not_where_it_pointed(tmp_path: Path):
    folder = _folder(tmp_path, {"t.json": json.dumps(_doc())})
    (folder / "u.json").symlink_to(tmp_path / "elsewhere" / "gone.json")
    with pytest.raises(FabricrefError) as err:
        Drawings(folder, Layout(tmp_path), ["t", "u"], _env())
    message = str(err.value)
    assert message.startswith("registry/report/drawings/u.json: ") and "file not found" in message, message
    assert "elsewhere" not in message and str(tmp_path) not in message


def test_a_drawing_that_is_no_regular_file_is_refused_without_reading_it(tmp_path: Path):
    """A FIFO would block the stage forever on its read; a device link would read without end."""
    folder = _folder(tmp_path, {"t.json": json.dumps(_doc())})
    os.mkfifo(folder / "u.json")
    with pytest.raises(FabricrefError) as err:
        Drawings(folder, Layout(tmp_path), ["t", "u"], _env())
    assert str(err.value).startswith("registry/report/drawings/u.json: not a drawing"), err.value
    assert "(not a regular file (a FIFO, socket or device)" in str(err.value)


def test_another_topologys_drawing_under_this_name_is_refused(tmp_path: Path):
    message = _refused(tmp_path, {"t.json": json.dumps(_doc("other"))}, ["t"])
    assert "drawing.topology_id" in message and "'other'" in message


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = doc
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        node[int(last) if isinstance(node, list) else last] = value

    return change


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (_set("edges.l9", [["a", "c", False]]), "edges.l9"),  # a link the drawing does not have
        (_set("edges.l2", [["a", "b", True]]), "edges.l2"),  # one graph edge under two links
        (_set("edges", {}), "edges.l1"),  # a link without its graph edges
        (_set("drawing.links.1.id", "l1"), "each id may appear once"),
        (_set("drawing.links.1.target", "ghost"), "drawing.links.1"),
        (_set("drawing.links.0.gbps", float("nan")), "drawing.links.0.gbps"),
        (_set("drawing.links.0.gbps", float("inf")), "drawing.links.0.gbps"),
        (_set("drawing.links.0.gbps", -900.0), "drawing.links.0.gbps"),
        (_set("drawing.links.0.gbps", 0.0), "drawing.links.0.gbps"),
        (_set("drawing.nodes.2.x", float("nan")), "drawing.nodes.2."),
        (_set("drawing.nodes.2.x", 1e400), "drawing.nodes.2."),
        (_set("drawing.nodes.2.w", -1.0), "drawing.nodes.2."),
        (_set("drawing.width", float("inf")), "drawing.width"),
    ],
)
def test_a_drawing_inconsistent_in_itself_is_refused_naming_the_field(tmp_path: Path, change, named: str):
    doc = _doc()
    change(doc)
    text = json.dumps(doc).replace("Infinity", "1e400")  # what a parser reads as infinity; NaN it reads as NaN
    message = _refused(tmp_path, {"t.json": text}, ["t"])
    assert named in message, message


def test_an_edge_listed_from_its_other_end_is_refused_not_dropped(tmp_path: Path):
    folder = _folder(tmp_path, {"t.json": json.dumps(_doc())})
    drawings = Drawings(folder, Layout(tmp_path), ["t"], _env())
    with pytest.raises(FabricrefError) as err:
        drawings.loads("t", [("b", "a", 8e9, 0.0)], None)
    assert "b - a" in str(err.value) and "drawings/t.json" in str(err.value)


def _phase(**change: Any) -> dict[str, Any]:
    row = {"workload_id": "w", "topology_id": "t", "phase": "p", "count": 2, "latency_s": 1.0, "bandwidth_s": 2.0}
    return {**row, "queueing_s": 0.5, **change}


def test_the_time_bars_share_one_scale_the_longest_spanning_it():
    from fabricref.report.stage import _phase_times

    rows = _phase_times([_phase(), _phase(topology_id="u", count=1), _phase(phase="q")])
    assert [r["label"] for r in rows] == ["w @ t", "w @ u"]
    assert (rows[0]["overhead"], rows[0]["bandwidth"], rows[0]["queueing"], rows[0]["total"]) == (4.0, 8.0, 2.0, 14.0)
    assert [s["width"] for s in rows[0]["segments"]] == ["28.571", "57.143", "14.286"]
    assert [s["x"] for s in rows[1]["segments"]] == ["0.000", "7.143", "21.429"]
    assert _phase_times([]) == []
    assert [
        s["width"] for s in _phase_times([_phase(latency_s=0.0, bandwidth_s=0.0, queueing_s=0.0)])[0]["segments"]
    ] == ["0.000"] * 3


@pytest.mark.parametrize(
    "change",
    [
        {"latency_s": None},
        {"bandwidth_s": float("nan")},
        {"queueing_s": float("inf")},
        {"latency_s": -1.0},
        {"count": None},
    ],
    ids=repr,
)
def test_a_phase_time_that_is_no_finite_number_of_seconds_is_refused_naming_the_phase(change):
    from fabricref.report.stage import _phase_times

    with pytest.raises(FabricrefError) as err:
        _phase_times([_phase(), _phase(phase="bad", **change)])
    message = str(err.value)
    assert message.startswith("registry/traffic/traffic.parquet: w on t, phase bad: ") and "finite" in message, message


def test_a_legend_counts_its_parts_in_plain_english_plurals():
    """The counts line under every drawing: '2 scale-up switches', never 'switchs'; one of a kind stays singular."""
    from types import SimpleNamespace

    from fabricref.views.render import legend

    counts = {"accelerator": 8, "scale_up_switch": 4, "leaf": 1, "spine": 2, "nic": 8, "cpu": 2}
    drawing = SimpleNamespace(links=[], nodes=[], counts=counts)
    assert legend(drawing)["counts"] == (
        "8 accelerators · 4 scale-up switches · 1 leaf switch · 2 spine switches · 8 NICs · 2 CPUs"
    )
