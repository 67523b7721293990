"""The report's drawings, as the explorer draws them (views/); a workload's heat map is the same drawing with each
link coloured by the time it is busy, as a share of the busiest drawn link.

The models part draws every topology and writes, beside each picture, the drawing as data (`drawings/ID.json`:
the laid-out drawing and the drawn link of every graph edge it draws). The workloads part colours those drawings
from that file, so a heat map is the reference page's drawing by construction and a workload's pages never load
a topology's wiring.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..core.files import read_bounded
from ..core.paths import Layout
from ..errors import FabricrefError
from ..formats.drawing import Drawing, DrawingFile
from ..views import render
from ..views.drawing import Groups, Wired
from ..views.layout import lay_out
from ..views.loads import link_loads

HEAT_BASIS = "time"
EdgeMap = dict[tuple[str, str], tuple[str, bool]]  # a graph edge (ends sorted) → (its drawn link, runs against it)


def _svg(env: Any, drawing: Drawing, loads: list[Any] | None) -> bytes:
    return env.get_template("drawing.svg.j2").render(s=render.svg(drawing, loads)).encode()


class Drawer:
    """Every topology of registry/topology/, loaded when first drawn and kept while the reference pages are
    written."""

    def __init__(self, lay: Layout, technology: dict[str, str], env: Any) -> None:
        """`technology`: reference → its `scale_up.technology`; `env`: the report's templates."""
        # Here, not at the top: the workloads part reads drawings as data and never loads networkx.
        from ..core.graphs import Topologies

        self.topologies = Topologies(lay)
        self.ids = list(self.topologies.ids)
        self.technology = technology
        self._groups: dict[str, Groups] = {}
        self._drawn: dict[str, Drawing] = {}
        self.env = env

    def close(self) -> None:
        self.topologies.close()

    def __enter__(self) -> Drawer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def groups(self, topology_id: str) -> Groups:
        if topology_id not in self._groups:
            t = self.topologies.get(topology_id)
            reference = t.graph.graph.get("reference")
            self._groups[topology_id] = Groups(Wired(t.graph, t.summary, self.technology.get(str(reference))))
        return self._groups[topology_id]

    def drawing(self, topology_id: str) -> Drawing:
        """The topology's first drawing (what the explorer opens on), laid out."""
        if topology_id not in self._drawn:
            self._drawn[topology_id] = lay_out(self.groups(topology_id).drawing(None))
        return self._drawn[topology_id]

    def svg(self, topology_id: str) -> bytes:
        return _svg(self.env, self.drawing(topology_id), None)

    def data(self, topology_id: str) -> bytes:
        """`drawings/ID.json` (`DrawingFile`), keys sorted; each link's edges in the drawing's edge order."""
        edges: dict[str, list[tuple[str, str, bool]]] = {}
        for (u, v), (link, against) in self.groups(topology_id).level(None)[1].items():
            edges.setdefault(link, []).append((u, v, against))
        doc = DrawingFile(drawing=self.drawing(topology_id), edges=edges).model_dump(mode="json")
        return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


MAX_DRAWING_BYTES = 64 * 1024 * 1024  # a 131,072-GPU cluster's drawing (tier × pod) is a few MB


class Drawings:
    """The drawings the models part wrote (`drawings/ID.json`), one per topology, every one read and checked before
    the workloads part writes a page."""

    def __init__(self, folder: Path, lay: Layout, ids: list[str], env: Any) -> None:
        self.folder, self.lay, self.env = folder, lay, env
        self.ids = ids
        self._read = {tid: self._load(tid) for tid in ids}

    def _refused(self, path: Path, why: str) -> FabricrefError:
        return FabricrefError(
            f"{self.lay.relative(path)}: not a drawing the report's models part wrote ({why}); "
            "run `dvc repro` (the report-models stage writes it)"
        )

    def _load(self, topology_id: str) -> tuple[Drawing, EdgeMap]:
        path = self.folder / f"{topology_id}.json"
        try:
            # A regular file inside the checkout, of a size the models part writes (a link to a device is refused).
            doc = DrawingFile.model_validate_json(read_bounded(path, MAX_DRAWING_BYTES, "a drawing", FabricrefError))
        except ValidationError as exc:
            first = exc.errors()[0]
            raise self._refused(path, f"{'.'.join(map(str, first['loc'])) or 'the file'}: {first['msg']}") from exc
        except FabricrefError as exc:  # its reason, without the path it starts with (a dangling link: its target)
            raise self._refused(path, str(exc).removeprefix(f"{path}: ")) from exc
        if doc.drawing.topology_id != topology_id:
            raise self._refused(path, f"drawing.topology_id: {doc.drawing.topology_id!r}, not {topology_id!r}")
        edge_map = {(u, v): (link, against) for link, es in doc.edges.items() for u, v, against in es}
        return doc.drawing, edge_map

    def drawing(self, topology_id: str) -> Drawing:
        return self._read[topology_id][0]

    def svg(self, topology_id: str, loads: list[Any] | None = None) -> bytes:
        return _svg(self.env, self.drawing(topology_id), loads)

    def loads(self, topology_id: str, rows: list[tuple[str, str, float, float]], communication: float | None) -> Any:
        """A workload's load on each drawn link (`rows`: per graph edge, bytes each way over one step or request)."""
        drawing, edge_map = self._read[topology_id]
        # An edge the drawing lists the other way round would lose its bytes unseen: the file is not the writer's.
        flipped = next(((u, v) for u, v, _, _ in rows if (u, v) not in edge_map and (v, u) in edge_map), None)
        if flipped:
            why = f"edges: the graph edge {flipped[0]} - {flipped[1]} listed from its other end"
            raise self._refused(self.folder / f"{topology_id}.json", why)
        return link_loads(rows, edge_map, drawing, HEAT_BASIS, communication)
