"""The report's drawings, as the explorer draws them (views/); a workload's heat map is the same drawing with each
link coloured by the time it is busy, as a share of the busiest drawn link."""

from __future__ import annotations

from typing import Any

from ..core.graphs import Topologies
from ..core.paths import Layout
from ..views import render
from ..views.drawing import Groups, Wired
from ..views.layout import lay_out
from ..views.loads import link_loads

HEAT_BASIS = "time"


class Drawer:
    """Every topology of registry/topology/, loaded when first drawn and kept while the report is written."""

    def __init__(self, lay: Layout, technology: dict[str, str]) -> None:
        """`technology`: reference → its `scale_up.technology`."""
        self.topologies = Topologies(lay)
        self.ids = list(self.topologies.ids)
        self.technology = technology
        self._groups: dict[str, Groups] = {}
        self._drawn: dict[str, Any] = {}
        self.env = render.environment("fabricref.report", strict=True)

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

    def drawing(self, topology_id: str) -> Any:
        """The topology's first drawing (what the explorer opens on), laid out."""
        if topology_id not in self._drawn:
            self._drawn[topology_id] = lay_out(self.groups(topology_id).drawing(None))
        return self._drawn[topology_id]

    def svg(self, topology_id: str, loads: list[Any] | None = None) -> bytes:
        drawing = self.drawing(topology_id)
        return self.env.get_template("drawing.svg.j2").render(s=render.svg(drawing, loads)).encode()

    def loads(self, topology_id: str, rows: list[tuple[str, str, float, float]], communication: float | None) -> Any:
        """A workload's load on each drawn link (`rows`: per graph edge, bytes each way over one step or request)."""
        edge_map = self.groups(topology_id).level(None)[1]
        return link_loads(rows, edge_map, self.drawing(topology_id), HEAT_BASIS, communication)
