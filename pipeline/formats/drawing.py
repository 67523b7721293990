"""A topology as it is drawn and a workload's load per drawn link: the models the explorer and the report share,
so both draw the same picture. Exact numbers carry, in `shown`, the text the page prints."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Response(BaseModel):
    """Responses are built by the library from checked data: frozen, extra keys refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)


Shown = dict[str, str]


class DrawNode(Response):
    id: str
    kind: str = Field(description="accelerator, cpu, tray, system, nic, scale_up_switch, leaf, spine, core, ...")
    role: str | None = None
    label: str
    count: int = Field(default=1, description="Members an aggregate node stands for (1: one physical part).")
    aggregate: bool = Field(default=False, description="Drawn for a tier, a group or a domain, not one part.")
    container: str | None = Field(default=None, description="The drawn box this node sits in (a tray, a system).")
    row: int = Field(description="Layer of the drawing, top first (core, spine, leaf, switches, parts).")
    order: float = Field(description="Position within its row.")
    opens: str | None = Field(default=None, description="The `open` value that draws this aggregate's inside.")
    failable: bool = False
    x: float = 0.0
    y: float = 0.0
    w: float = 0.0
    h: float = 0.0


class DrawLink(Response):
    id: str
    source: str
    target: str
    network: Literal["scale_up", "scale_out", "frontend", "host"]
    technology: str | None = Field(default=None, description="NVLink, Infinity Fabric, UALink ... on scale-up links.")
    gbps: float | None = Field(description="Per direction, summed over the members of an aggregate link.")
    links: int = Field(description="Physical links (lanes bundles as the graph counts them) this line stands for.")
    members: int = Field(default=1, description="Graph edges this line stands for (1 at full detail).")
    field: str | None
    status: str
    confidence: str
    failable: bool = False
    shown: Shown


class Drawing(Response):
    topology_id: str
    reference: str = Field(description="The reference whose fields the links' rates come from.")
    title: str
    level: str = Field(description="full, aggregate (tier × pod), pod:N or domain:ID.")
    levels: list[str] = Field(description="Where this drawing can go next: the aggregate, a pod, a domain.")
    nodes: list[DrawNode]
    links: list[DrawLink]
    counts: dict[str, int] = Field(description="Physical parts by kind in the whole topology.")
    width: float = 0.0
    height: float = 0.0
    caveat: str


class LinkLoad(Response):
    id: str = Field(description="The drawn link (DrawLink.id) of the drawing at the request's `open`.")
    bytes: float = Field(description="Bytes over the link per step or request, both directions.")
    busy_seconds: float = Field(description="Time the link is busy per step or request at its line rate.")
    share: float = Field(ge=0, le=1, description="Of the busiest drawn link, by the request's heat basis.")
    shown: Shown


class DrawingFile(Response):
    """`registry/report/drawings/ID.json`, which the report's models part writes beside each picture: the topology's
    first drawing, laid out, and per drawn link the graph edges it stands for, each as (source, target, whether the
    edge runs against the link: its source at the link's target end)."""

    drawing: Drawing
    edges: dict[str, list[tuple[str, str, bool]]]

    @model_validator(mode="after")
    def _consistent(self) -> DrawingFile:
        """What the writer guarantees and a heat map relies on: ids unique, every link between drawn nodes with a
        finite positive rate (or none), finite sizes, and each link's `members` graph edges listed under it, no
        graph edge under two links."""
        d = self.drawing
        sized = [("drawing.width, height", (), (d.width, d.height))]
        sized += [
            (f"drawing.nodes.{i}.x, y, w, h, order", (x.x, x.y, x.order), (x.w, x.h)) for i, x in enumerate(d.nodes)
        ]
        for where, places, sizes in sized:
            if not all(map(math.isfinite, (*places, *sizes))) or min(sizes) < 0:
                raise ValueError(f"{where}: expected finite numbers, sizes not negative")
        nodes = {x.id for x in d.nodes}
        links = {x.id for x in d.links}
        if len(nodes) != len(d.nodes) or len(links) != len(d.links):
            raise ValueError("drawing.nodes / drawing.links: each id may appear once")
        for i, x in enumerate(d.links):
            if x.source not in nodes or x.target not in nodes:
                raise ValueError(f"drawing.links.{i}: {x.source!r} -> {x.target!r} is not between drawn nodes")
            if x.gbps is not None and not (math.isfinite(x.gbps) and x.gbps > 0):
                raise ValueError(f"drawing.links.{i}.gbps: {x.gbps}; expected a finite rate above 0, or null")
            if len(self.edges.get(x.id, ())) != x.members:
                raise ValueError(f"edges.{x.id}: expected the link's {x.members} graph edge(s)")
        if set(self.edges) - links:
            raise ValueError(f"edges.{min(set(self.edges) - links)}: not a link of the drawing")
        seen: set[tuple[str, str]] = set()
        for link, es in self.edges.items():
            for u, v, _ in es:
                pair = (u, v) if u <= v else (v, u)
                if pair in seen:
                    raise ValueError(f"edges.{link}: the graph edge {u} - {v} is listed under two links")
                seen.add(pair)
        return self
