"""Measured nccl-tests / rccl-tests logs as first-class inputs: pinned by SHA-256 in the snapshot store like a
document (origin `measured`), tabled with the log's hash, and compared with the model on the same topology.

Pins live in sources/measured/<measurement-id>.json; the bytes in the content-addressed store; the table
registry/measurements/measurements.parquet is rebuilt from every pin, so it always equals what the pins name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.files import checkout_lock, read_bounded, transaction
from ..core.paths import Layout, check_slug
from ..core.schemas import load_json, load_model
from ..core.store import SnapshotStore, sha256_bytes
from ..core.text import control_problem, visible
from ..errors import FabricrefError, UsageError
from ..formats.common import SLUG_MAX_LENGTH
from ..formats.measured import MeasuredPin
from .collectives import ALGORITHMS
from .nccl_log import Log, parse_bytes

TABLE = "measurements"
# Written out, not through core.registry.columns: importing this module must not load DuckDB.
COLUMNS = [
    ("measurement_id", "VARCHAR"),
    ("sha256", "VARCHAR"),
    ("topology_id", "VARCHAR"),
    ("op", "VARCHAR"),
    ("algorithm", "VARCHAR"),
    ("ranks", "INTEGER"),
    ("line", "INTEGER"),
    ("placement", "VARCHAR"),
    ("bytes", "BIGINT"),
    ("count", "BIGINT"),
    ("dtype", "VARCHAR"),
    ("redop", "VARCHAR"),
    ("root", "INTEGER"),
    ("time_us", "DOUBLE"),
    ("algbw_gb_per_s", "DOUBLE"),
    ("busbw_gb_per_s", "DOUBLE"),
]


def table_dir(lay: Layout) -> Path:
    return lay.registry_dir / "measurements"


# A measured log is the stdout of one nccl-tests run: kilobytes. More than this is not one (and would be parsed
# in Python line by line, then held in the store).
MAX_LOG_BYTES = 4 * 1024 * 1024


def measurement_id(topology_id: str, op: str, sha256: str) -> str:
    """`<topology>-<op>-<12 hex digits>`, a slug: a topology id that leaves it no room is refused by name."""
    mid = f"{topology_id}-{op}-{sha256[:12]}"
    if len(mid) > SLUG_MAX_LENGTH:
        room = SLUG_MAX_LENGTH - len(mid) + len(topology_id)
        raise UsageError(
            f"--topology {topology_id}: {len(topology_id)} characters; a measurement id is `{mid[len(topology_id) :]}` "
            f"after the topology id, at most {SLUG_MAX_LENGTH} characters in all, so for this log the topology id "
            f"can have at most {room}"
        )
    return mid


def import_log(
    lay: Layout, file: Path, topology_id: str, algorithm: str | None = None, op: str | None = None
) -> tuple[MeasuredPin, Log, bool]:
    """Parse and check everything first (nothing is written for a bad log), then, under the checkout's lock, write
    the bytes, the pin and the rebuilt table as one transaction: all three or none (a full disk, a value DuckDB
    cannot hold, a kill leave the checkout as it was). Returns (pin, parsed log, whether the pin is new)."""
    if algorithm is not None and algorithm not in ALGORITHMS:
        raise UsageError(f"--algorithm {algorithm!r}: expected one of {', '.join(ALGORITHMS)}")
    check_slug(topology_id, "topology id")
    problem = control_problem(file.name, layout_ok=False)
    if problem:
        raise UsageError(f"{visible(str(file), keep_layout=False)}: the file name {problem}; rename the file")
    data = read_bounded(file, MAX_LOG_BYTES, "an nccl-tests / rccl-tests log (a text file)")
    log = parse_bytes(data, str(file), op)
    from .view import view_for

    view = view_for(lay, topology_id)
    if log.ranks > len(view.accelerators):
        raise UsageError(
            f"{file}: the log ran on {log.ranks} ranks; topology {topology_id} has {len(view.accelerators)} "
            "accelerators"
        )
    sha = sha256_bytes(data)
    pin = MeasuredPin(
        measurement_id=measurement_id(topology_id, log.op, sha),
        sha256=sha,
        size=len(data),
        file_name=file.name,
        topology_id=topology_id,
        op=log.op,
        algorithm=algorithm,
        ranks=log.ranks,
        hosts=log.hosts,
        devices=[visible(f"rank {r} on {h} device {d}: {name}", keep_layout=False) for r, h, d, name in log.devices],
    )
    import duckdb

    from ..core.registry import hash_path

    target = lay.measured_dir / f"{pin.measurement_id}.json"
    with checkout_lock(lay.root):
        new = True
        if target.exists():
            old = load_model(MeasuredPin, load_json(target), "measured-pin.schema.json", target)
            differs = [k for k in type(pin).model_fields if k != "file_name" and getattr(old, k) != getattr(pin, k)]
            if differs:
                shown = ", ".join(f"{k} {getattr(pin, k)!r} (pinned: {getattr(old, k)!r})" for k in differs)
                raise UsageError(
                    f"{lay.relative(target)} already pins these bytes (sha256 {sha[:12]}, imported as "
                    f"{old.file_name!r}) with other declarations: {shown}; the pin is append-only and was not changed"
                )
            new, pin = False, old  # the same bytes under another file name are the same measurement
        store = SnapshotStore(lay.store_dir)
        rows = _rows(lay, extra=[(pin, log)] if new else [])
        with transaction(lay.root) as tx:
            if not store.holds(sha, len(data)):
                tx.write(store.path_for(sha), data, mode=0o444)
            if new:
                tx.write_json(target, pin.model_dump(mode="json"))
            try:
                built = _write_rows(tx.scratch(), rows)
            except (OSError, duckdb.Error) as exc:  # a full disk, or a value the table cannot hold
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                raise FabricrefError(f"cannot write {lay.relative(table_dir(lay))}/{TABLE}.parquet: {reason}") from None
            tx.place(table_dir(lay) / built.name, built)
            tx.place(table_dir(lay) / hash_path(built).name, hash_path(built))
    return pin, log, new


def _logs(lay: Layout) -> list[tuple[Path, MeasuredPin, Log]]:
    """Every pinned log, parsed again from the store (the bytes the pin names, not the file imported)."""
    store = SnapshotStore(lay.store_dir)
    out = []
    for path in sorted(lay.measured_dir.glob("*.json")):
        pin = load_model(MeasuredPin, load_json(path), "measured-pin.schema.json", path)
        where = f"{lay.relative(path)} ({pin.file_name}, sha256 {pin.sha256[:12]})"
        out.append((path, pin, parse_bytes(store.read(pin.sha256), where, pin.op)))
    return out


def _rows(lay: Layout, extra: list[tuple[MeasuredPin, Log]] | None = None) -> list[tuple[Any, ...]]:
    """The table's rows: every pinned log's (re-read from the store), and those of `extra` (being imported); the
    pin's columns first (its algorithm "" when not declared), then the log row's, by the names of `COLUMNS`."""
    rows = []
    for pin, log in [(pin, log) for _path, pin, log in _logs(lay)] + (extra or []):
        head = (pin.measurement_id, pin.sha256, pin.topology_id, pin.op, pin.algorithm or "", pin.ranks)
        rows += [(*head, *(getattr(r, name) for name, _ in COLUMNS[len(head) :])) for r in log.rows]
    return rows


def measured_rows(lay: Layout) -> list[dict[str, Any]]:
    """Every row of every pinned log with what cites it (hash, file name, origin, pin), in pin and line order."""
    return [
        {
            "measurement_id": pin.measurement_id,
            "sha256": pin.sha256,
            "origin": pin.origin,
            "file_name": pin.file_name,
            "pin": lay.relative(path),
            "topology_id": pin.topology_id,
            "op": pin.op,
            "algorithm_declared": pin.algorithm,
            "ranks": pin.ranks,
            "hosts": pin.hosts,
            "placement": r.placement,
            "bytes": r.bytes,
            "line": r.line,
            "measured_seconds": r.time_us * 1e-6,
            "measured_busbw_gb_per_s": r.busbw_gb_per_s,
        }
        for path, pin, log in _logs(lay)
        for r in log.rows
    ]


def _write_rows(directory: Path, rows: list[tuple[Any, ...]]) -> Path:
    from ..core.registry import write_table

    return write_table(directory, TABLE, COLUMNS, ["measurement_id", "placement", "bytes", "line"], rows)


def model_rows(lay: Layout, topology_id: str, measured: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The model beside each measured row (same order): the same op, ranks and forced algorithm on the topology
    the log ran on; its time, busbw, model / measured busbw ratio, chosen algorithm and protocol, confidence."""
    from .calculator import confidence, first_ranks
    from .collectives import estimate
    from .view import view_for

    if not measured:
        return []
    view = view_for(lay, topology_id)
    shapes: dict[int, Any] = {}
    out = []
    for m in measured:
        ranks = m["ranks"]
        cal, shape = shapes.get(ranks) or shapes.setdefault(ranks, first_ranks(view, ranks))
        cost = estimate(cal, m["op"], shape, float(m["bytes"]), m["algorithm_declared"] or None)
        busbw = m["measured_busbw_gb_per_s"]
        out.append(
            {
                "model_seconds": cost.seconds,
                "model_busbw_gb_per_s": cost.busbw_gb_per_s,
                "ratio": cost.busbw_gb_per_s / busbw if busbw > 0 else None,
                "algorithm": cost.algorithm,
                "protocol": cost.protocol,
                "algorithm_declared": m["algorithm_declared"] or None,
                "confidence": confidence(cost, shape),
            }
        )
    return out


def compare(lay: Layout, topology_id: str, placement: str = "out-of-place") -> list[dict[str, Any]]:
    """Per measured size: measured busbw, the model's busbw for the same op, ranks and algorithm, their ratio."""
    from ..core.registry import Tables

    path = table_dir(lay) / f"{TABLE}.parquet"
    if not path.exists():
        raise UsageError(f"no measurements imported yet ({lay.relative(path)} does not exist): run measured import")
    with Tables({TABLE: path}) as t:
        measured = t.rows(
            "SELECT measurement_id, sha256, op, ranks, bytes, time_us * 1e-6 AS measured_seconds, "
            "busbw_gb_per_s AS measured_busbw_gb_per_s, NULLIF(algorithm, '') AS algorithm_declared "
            f"FROM {TABLE} WHERE topology_id = ? AND placement = ? ORDER BY measurement_id, bytes",
            topology_id,
            placement,
        )
    if not measured:
        raise UsageError(f"no measurements for topology {topology_id!r}: run measured import FILE --topology ID")
    # The model's rows name the declared algorithm themselves, after its figures.
    return [
        {**{k: v for k, v in m.items() if k != "algorithm_declared"}, **model}
        for m, model in zip(measured, model_rows(lay, topology_id, measured), strict=True)
    ]
