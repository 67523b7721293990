"""Plot data for `dvc plots show`: time per phase split into overhead / bandwidth / queueing, utilization of
the busiest physical links, and local versus cross-domain KV transfer times across prompt lengths."""

from __future__ import annotations

import csv
import heapq
import io
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.columns import Coded, plain
from ..core.files import atomic_write_bytes
from .parts import LINK_COLUMNS, TRAFFIC_COLUMNS

if TYPE_CHECKING:
    from ..core.registry import Tables
    from ..estimate.view import View

PROMPTS = [1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]
KV_MODEL = {"layers": 80, "kv_heads": 8, "head_dim": 128, "dtype": "bf16"}  # the 70B model of the workloads


def _csv_bytes(header: list[str], rows: list[list[Any]]) -> bytes:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue().encode()


def _csv(path: Path, header: list[str], rows: list[list[Any]]) -> None:
    atomic_write_bytes(path, _csv_bytes(header, rows))


TERMS = (("overhead", "latency_s"), ("bandwidth", "bandwidth_s"), ("queueing", "queueing_s"))
BUSIEST = 25


def write_phases(out: Path, tables: Tables) -> None:
    """phase_times.csv (long form: one row per phase and term, stacked in the plot) and link_utilization.csv
    (the 25 busiest physical links), from the combined traffic tables as written."""
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    terms = TERMS
    for r in tables.rows("SELECT * FROM traffic ORDER BY workload_id, topology_id, phase"):
        case = f"{r['workload_id']} @ {r['topology_id']} : {r['phase']}"
        for term, column in terms:
            rows.append([case, term, round(r[column] * r["count"], 9)])
    _csv(out / "phase_times.csv", ["phase", "term", "seconds"], rows)
    # Only the rows that can rank among the 25 busiest are read into Python (~100,000 links otherwise): a row
    # whose rounded utilization ties or beats the 25th-largest rounded one is within 1e-6 of the 25th-largest raw
    # one (rounding to 6 places moves a value by at most 5e-7 and keeps the order). NaN rows are always read.
    top = [
        r[0]
        for r in tables.tuples(
            "SELECT utilization FROM traffic_links WHERE utilization IS NOT NULL AND NOT isnan(utilization) "
            "ORDER BY 1 DESC LIMIT 25"
        )[1]
    ]
    floor = top[-1] - 1e-6 if len(top) == 25 else float("-inf")
    links = tables.rows(
        "SELECT workload_id, topology_id, phase, source, target, utilization FROM traffic_links "
        "WHERE utilization IS NOT NULL AND (isnan(utilization) OR utilization >= ?)",
        floor,
    )
    util = sorted(
        (
            [
                f"{r['workload_id']} @ {r['topology_id']} : {r['phase']} : {r['source']} – {r['target']}",
                round(r["utilization"], 6),
            ]
            for r in links
        ),
        key=lambda x: (-x[1], x[0]),
    )[:25]
    _csv(out / "link_utilization.csv", ["link", "utilization"], util)


def as_list(column: Any) -> list[Any]:
    """A table column in any form `write_columns` takes (list, `Coded`, NumPy array), as a list of values."""
    return column if isinstance(column, list) else plain(column)


def _returned_as(kind: type, column: Any) -> bool:
    """Every value of the column is exactly of `kind` or NULL: what reading it back from Parquet would give."""
    if isinstance(column, np.ndarray):  # tolist() gives Python floats of float64, ints of int64
        return column.dtype == {float: np.float64, int: np.int64}.get(kind)
    values = column.values if isinstance(column, Coded) else column
    return all(v is None or type(v) is kind for v in values)


def _at(column: Any, rows: list[int]) -> list[Any]:
    """The column's values at `rows`."""
    if isinstance(column, np.ndarray):
        return column[rows].tolist()
    if isinstance(column, Coded):
        return list(map(column.values.__getitem__, column.codes[rows].tolist()))
    return list(map(column.__getitem__, rows))


def phases_from(traffic: list[Any], links: list[Any]) -> dict[str, bytes] | None:
    """What `write_phases` writes (file name → bytes), from the tables' columns in memory (`traffic`, `links`: the
    columns of TRAFFIC_COLUMNS and LINK_COLUMNS, rows in any order) instead of the files read back: the same
    bytes, or None where the in-memory reading could differ from the SQL — a NULL or a tie in the phases' sort key,
    a value not of the type the column gives back, a NaN utilization (whose place in a sort depends on the row
    order)."""
    names = [c for c, _ in TRAFFIC_COLUMNS]
    keys = list(zip(*(as_list(traffic[names.index(c)]) for c in ("workload_id", "topology_id", "phase")), strict=True))
    count = traffic[names.index("count")]
    numbers = [as_list(traffic[names.index(c)]) for _, c in TERMS]
    if (
        any(type(k[0]) is not str or type(k[1]) is not str or type(k[2]) is not str for k in keys)
        or len(set(keys)) != len(keys)
        or not _returned_as(int, count)
        or None in as_list(count)
        or not all(type(v) is float for column in numbers for v in column)
    ):
        return None
    count = as_list(count)
    names = [c for c, _ in LINK_COLUMNS]
    labels = [links[names.index(c)] for c in ("workload_id", "topology_id", "phase", "source", "target")]
    utilization = links[names.index("utilization")]
    if not all(_returned_as(str, c) for c in labels) or not _returned_as(float, utilization):
        return None
    if isinstance(utilization, np.ndarray):
        util_values, nulls = utilization, np.zeros(len(utilization), dtype=bool)
    else:
        listed = as_list(utilization)
        nulls = np.array([u is None for u in listed], dtype=bool)
        util_values = np.array([math.nan if u is None else u for u in listed], dtype=np.float64)
    if np.isnan(util_values[~nulls]).any():
        return None
    rows = []
    for i in sorted(range(len(keys)), key=keys.__getitem__):  # ORDER BY workload_id, topology_id, phase
        case = f"{keys[i][0]} @ {keys[i][1]} : {keys[i][2]}"
        for (term, _), values in zip(TERMS, numbers, strict=True):
            rows.append([case, term, round(values[i] * count[i], 9)])
    # The busiest: the SQL's floor (the 25th-largest utilization less 1e-6), then the rows at or above it (NULL is
    # NaN here, never at or above), ranked by rounded utilization (descending) and label: the n smallest
    # (-rounded, label) pairs, which is `sorted(...)[:25]` of the SQL's rows with their key.
    valid = util_values[~nulls]
    top = np.sort(valid)[::-1][:BUSIEST].tolist()
    floor = top[-1] - 1e-6 if len(top) == BUSIEST else float("-inf")
    rows_at = np.flatnonzero(util_values >= floor)
    util = _busiest_coded(labels, util_values, rows_at)
    if util is None:
        util = _busiest(labels, util_values, rows_at)
    return {
        "phase_times.csv": _csv_bytes(["phase", "term", "seconds"], rows),
        "link_utilization.csv": _csv_bytes(["link", "utilization"], util),
    }


def _busiest(labels: list[Any], util_values: np.ndarray, rows_at: np.ndarray) -> list[list[Any]]:
    """The 25 smallest (-round(utilization, 6), label) of the rows `rows_at`, as [label, rounded] (the generic way:
    every row's label built)."""
    w, t, ph, src, dst = (_at(c, rows_at.tolist()) for c in labels)
    found = (
        (-round(u, 6), f"{w[j]} @ {t[j]} : {ph[j]} : {src[j]} – {dst[j]}")
        for j, u in enumerate(util_values[rows_at].tolist())
    )
    return [[label, -negated] for negated, label in heapq.nsmallest(BUSIEST, found)]


def _busiest_coded(labels: list[Any], util_values: np.ndarray, rows_at: np.ndarray) -> list[list[Any]] | None:
    """`_busiest` without building every label when the label columns are coded: ~70,000 links tie at the top on
    the shipped clusters, and only the 25 smallest labels among them count. A label is P + S, P = "workload @
    topology : phase : " (a few distinct), S = "source – target". Taking the rows in the order of their P, until 25
    are taken, plus every later P that starts with a taken one: any other row's label is larger than all taken
    (its P differs from each taken P before that one ends, and is larger there), so the 25 smallest are among
    the taken. None (use `_busiest`) unless the columns are coded and no utilization is zero (whose sign a
    grouping by value would not keep)."""
    if not all(isinstance(c, Coded) for c in labels) or not len(rows_at):
        return None
    u = util_values[rows_at]
    distinct, inverse = np.unique(u, return_inverse=True)
    rounded = np.array([round(x, 6) for x in distinct.tolist()], dtype=np.float64)[inverse]
    if (rounded == 0.0).any():
        return None
    w, t, ph, src, dst = labels
    codes = [c.codes[rows_at].astype(np.int64) for c in (w, t, ph)]
    triple = (codes[0] * (len(t.values) + 1) + codes[1]) * (len(ph.values) + 1) + codes[2]
    out: list[list[Any]] = []
    for level in sorted(set(rounded.tolist()), reverse=True):
        at = np.flatnonzero(rounded == level)
        keys, first, which = np.unique(triple[at], return_index=True, return_inverse=True)
        prefix = {}
        for k, i in enumerate(first.tolist()):
            row = at[i]
            prefix[k] = f"{w.values[codes[0][row]]} @ {t.values[codes[1][row]]} : {ph.values[codes[2][row]]} : "
        sizes = np.bincount(which, minlength=len(keys)).tolist()
        need, taken, count = BUSIEST - len(out), [], 0
        for k in sorted(prefix, key=prefix.__getitem__):
            if count < need or any(prefix[k].startswith(prefix[j]) for j in taken):
                taken.append(k)
                count += sizes[k]
        chosen = at[np.isin(which, taken)]
        rows = rows_at[chosen].tolist()
        found = (
            prefix[k] + f"{src.values[a]} – {dst.values[b]}"
            for k, a, b in zip(
                which[np.isin(which, taken)].tolist(), src.codes[rows].tolist(), dst.codes[rows].tolist(), strict=True
            )
        )
        out += [[label, level] for label in heapq.nsmallest(need, found)]
        if len(out) >= BUSIEST:
            break
    return out


def kv_csv(views: dict[str, View]) -> bytes:
    """kv_transfer.csv: the 70B model's KV cache per decode rank, sent inside an NVL72 domain and across the
    fabric between 8-GPU servers, for each prompt length."""
    # Imported here: writing the phase plots needs no estimating code.
    from ..estimate import sizing
    from ..estimate.cost import send

    local, cross = views["nvidia-gb200-nvl72"], views["illustrative-h100-4096"]
    kv_rows = []
    for tokens in PROMPTS:
        per_rank = sizing.kv_cache(**KV_MODEL, tokens=tokens)["bytes"] / 8  # type: ignore[operator]
        a = send(local, "kv", local.accelerators[0], local.accelerators[8], per_rank, concurrent=8)
        b = send(cross, "kv", cross.accelerators[0], cross.accelerators[8], per_rank, concurrent=8)
        kv_rows.append([tokens, round(a.seconds, 9), round(b.seconds, 9)])
    return _csv_bytes(["prompt_tokens", "local_nvl72_seconds", "cross_fabric_8gpu_servers_seconds"], kv_rows)
