"""Where each part of a drawing goes: rows top to bottom, each tray a block whose rows line up, blocks side by side
and wrapped into lines, trays nested in their system's box. Deterministic; the browser only draws what this places.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..formats.drawing import Drawing, DrawNode

# Sizes in SVG user units (the page scales the drawing to its width).
SIZES = {
    "accelerator": (24, 24),
    "scale_up_switch": (34, 18),
    "cpu": (24, 16),
    "nic": (16, 12),
    "leaf": (20, 14),
    "spine": (20, 14),
    "core": (20, 14),
    "frontend_switch": (20, 14),
}
AGGREGATE = (132, 40)  # a node standing for many parts (tier × pod): eight pods fit one line
DOMAIN = (44, 18)  # one scale-up domain drawn as one box to open (a pod's view)
GAP_X, GAP_Y = 6, 54  # between nodes of a row; between rows
BLOCK_PAD, BLOCK_GAP, LABEL = 8, 14, 14  # inside a box; between boxes; a box's label line
MAX_WIDTH = 1400.0  # a row or a line of boxes wraps beyond this
MARGIN = 12


@dataclass
class _Block:
    """The parts of one box (a tray; or one row of parts in no box), laid out on their own rows."""

    key: str
    nodes: list[DrawNode]
    rows: dict[int, list[DrawNode]] = field(default_factory=dict)
    width: float = 0.0

    def measure(self) -> None:
        for n in self.nodes:
            self.rows.setdefault(n.row, []).append(n)
        self.width = max(sum(size(n)[0] for n in ns) + GAP_X * (len(ns) - 1) for ns in self.rows.values())
        self.width += 2 * BLOCK_PAD


def size(n: DrawNode) -> tuple[float, float]:
    if n.aggregate and n.kind == "domain" and n.count == 1:
        return DOMAIN
    if n.aggregate:
        return AGGREGATE
    return SIZES.get(n.kind, (20, 14))


def lay_out(drawing: Drawing) -> Drawing:
    """The drawing with x, y (top-left), w, h on every node and its overall width and height."""
    boxes = {n.id: n for n in drawing.nodes if n.row < 0}
    parts = [n for n in drawing.nodes if n.row >= 0]
    placed: dict[str, tuple[float, float, float, float]] = {}

    # Blocks: the parts of each innermost box; parts in no box form one block per row.
    blocks: dict[str, _Block] = {}
    for n in sorted(parts, key=lambda n: n.order):
        key = n.container if n.container in boxes else f"row:{n.row}"
        blocks.setdefault(key, _Block(key, [])).nodes.append(n)
    loose: list[_Block] = []
    for key in list(blocks):
        if key.startswith("row:"):
            loose += _wrap_row(blocks.pop(key))
    blocks_all = [*blocks.values(), *loose]
    for b in blocks_all:
        b.measure()

    # Bands: blocks whose rows overlap share a band; bands stack top to bottom by their first row.
    bands: list[list[_Block]] = []
    for b in sorted(blocks_all, key=lambda b: (min(b.rows), b.nodes[0].order)):
        lo, hi = min(b.rows), max(b.rows)
        for band in bands:
            if any(lo <= max(o.rows) and min(o.rows) <= hi for o in band) and _same_kind(band[0], b):
                band.append(b)
                break
        else:
            bands.append([b])
    bands.sort(key=lambda band: min(min(b.rows) for b in band))

    depth = {k: _depth(k, boxes) for k in boxes}
    top_pad = max(depth.values(), default=0) * (BLOCK_PAD + LABEL)
    # Lines top to bottom: each a row of blocks with the rows it draws, in drawing order. A rack whose compute
    # trays wrap into two lines under one line of switch trays (an NVL72) is drawn as the rack is built: half
    # the compute trays above the switches (mirrored, accelerators facing them), half below.
    specs: list[tuple[list[_Block], list[int], bool, int]] = []  # blocks, rows in drawing order, boxed, band
    for i, band in enumerate(bands):
        rows = sorted({r for b in band for r in b.rows})
        boxed = not band[0].key.startswith("row:")
        for line in _lines(band):
            specs.append((line, rows, boxed, i))
    if (
        len(bands) >= 2
        and len(specs) >= 3
        and specs[0][3] == 0
        and specs[1][3] == specs[2][3] == 1
        and (len(specs) == 3 or specs[3][3] != 1)
        and max(specs[0][1]) < min(specs[1][1])
        and specs[0][2]
        and specs[1][2]
    ):
        upper, switches, lower = specs[1], specs[0], specs[2]
        specs[0:3] = [(upper[0], upper[1][::-1], True, 1), switches, lower]
    heights = {
        r: max(size(n)[1] for b in blocks_all for n in b.rows.get(r, []))
        for r in {r for b in blocks_all for r in b.rows}
    }
    y = MARGIN + top_pad
    width = 0.0
    lines: list[tuple[list[_Block], float]] = []  # blocks, width
    for k, (line, rows, boxed, band_index) in enumerate(specs):
        line_w = sum(b.width for b in line) + BLOCK_GAP * (len(line) - 1)
        lines.append((line, line_w))
        width = max(width, line_w)
        row_y, yy = {}, y + (LABEL + BLOCK_PAD if boxed else 0)
        for r in rows:
            row_y[r] = yy
            yy += heights[r] + (GAP_Y if boxed or r != rows[-1] else 0)
        for b in line:
            for r, ns in b.rows.items():
                for n in ns:
                    placed[n.id] = (0.0, row_y[r] + (heights[r] - size(n)[1]) / 2, *size(n))
        bottom = (yy - GAP_Y + BLOCK_PAD) if boxed else yy
        if k < len(specs) - 1 and specs[k + 1][3] != band_index:
            y = bottom + GAP_Y + (top_pad if specs[k + 1][2] else 0)
        else:
            y = bottom + (BLOCK_GAP + top_pad if boxed else GAP_X * 2)
    width = max(width, 200.0)

    # x: each line centred, its blocks left to right, each block's rows centred in the block.
    for line, line_w in lines:
        x = MARGIN + (width - line_w) / 2
        for b in line:
            for ns in b.rows.values():
                row_w = sum(size(n)[0] for n in ns) + GAP_X * (len(ns) - 1)
                xx = x + (b.width - row_w) / 2
                for n in ns:
                    _, ny, w, h = placed[n.id]
                    placed[n.id] = (xx, ny, w, h)
                    xx += w + GAP_X
            x += b.width + BLOCK_GAP

    # Boxes: around what they hold (parts, or boxes inside them), innermost first.
    for key in sorted(boxes, key=lambda k: -depth[k]):
        inside = [placed[n.id] for n in drawing.nodes if n.container == key and n.id in placed]
        if not inside:
            continue
        x0 = min(p[0] for p in inside) - BLOCK_PAD
        y0 = min(p[1] for p in inside) - BLOCK_PAD - LABEL
        x1 = max(p[0] + p[2] for p in inside) + BLOCK_PAD
        y1 = max(p[1] + p[3] for p in inside) + BLOCK_PAD
        placed[key] = (x0, y0, x1 - x0, y1 - y0)

    # Boxes nested deeper than the padding reserved for them can start above or left of the margin: the whole
    # drawing moves by what it needs so that every box lies inside it.
    dx = max(0.0, MARGIN - min((p[0] for p in placed.values()), default=MARGIN))
    dy = max(0.0, MARGIN - min((p[1] for p in placed.values()), default=MARGIN))
    if dx or dy:
        placed = {k: (x + dx, y + dy, w, h) for k, (x, y, w, h) in placed.items()}

    nodes = [
        n.model_copy(update=dict(zip(("x", "y", "w", "h"), (round(float(v), 1) for v in placed[n.id]), strict=True)))
        for n in drawing.nodes
        if n.id in placed
    ]
    height = max((n.y + n.h for n in nodes), default=0.0) + MARGIN
    right = max((n.x + n.w for n in nodes), default=0.0) + MARGIN
    return drawing.model_copy(update={"nodes": nodes, "width": round(right, 1), "height": round(height, 1)})


def _same_kind(a: _Block, b: _Block) -> bool:
    """Boxes band with boxes, loose rows with loose rows (a wrapped row must not slide beside a tray)."""
    return a.key.startswith("row:") == b.key.startswith("row:")


def _depth(key: str, boxes: dict[str, Any]) -> int:
    d, seen = 0, {key}
    parent = boxes[key].container
    while parent in boxes and parent not in seen:
        seen.add(parent)
        d += 1
        parent = boxes[parent].container
    return d


def _greedy(items: list[Any], width: Any, gap: float) -> list[list[Any]]:
    """`items` in lines, each taking the next item while it fits MAX_WIDTH."""
    lines: list[list[Any]] = [[]]
    used = 0.0
    for item in items:
        w = width(item)
        if lines[-1] and used + w > MAX_WIDTH:
            lines.append([])
            used = 0.0
        lines[-1].append(item)
        used += w + gap
    return lines


def _wrap_row(block: _Block) -> list[_Block]:
    """A row of parts in no box, wrapped into several rows of at most MAX_WIDTH (a pod's 192 leaves). Sub-rows keep
    their row number ('row:R:0', 'row:R:1', ...) and stack, each after the previous one."""
    rows = _greedy(block.nodes, lambda n: size(n)[0] + GAP_X, 0.0)
    return [_Block(f"{block.key}:{step}", ns) for step, ns in enumerate(rows) if ns]


def _lines(band: list[_Block]) -> list[list[_Block]]:
    """Blocks of a band in lines of at most MAX_WIDTH (eighteen compute trays in two lines of nine)."""
    lines = _greedy(band, lambda b: b.width, BLOCK_GAP)
    if len(lines) > 1:  # even lines: 18 trays as 9 + 9, not 14 + 4
        per = -(-len(band) // len(lines))
        lines = [band[i : i + per] for i in range(0, len(band), per)]
    return lines
