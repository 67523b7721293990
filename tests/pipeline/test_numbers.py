"""Numbers as people read them (#31): every CLI table prints its numbers through the one formatter (units,
engineering prefixes, a few significant digits, `—` for none; never a float's repr or exponent notation), one
unit family for the computed bandwidths of a table, counts by kind (racks apart from servers), calculator
options that take amounts as people write them (70B, 128k), and `--json` in the table's order."""

from __future__ import annotations

import json
import re

import pytest
from conftest import CLUSTERS, HUGE_CLUSTERS, ROOT

# A float's repr or %g output, as a word of its own (not inside a hash): exponent notation, or six and more
# digits after a point.
EXPONENT = re.compile(r"(?<![\w.])[+-]?\d+(?:\.\d+)?[eE][+-]?\d+(?!\w)")
RAW_FLOAT = re.compile(r"(?<![\w.])\d+\.\d{6,}(?!\w)")
BITS = re.compile(r"\d [kMGTPE]?b/s")
BYTES = re.compile(r"\d [kMGTPE]?B/s")
WORKLOADS = sorted(p.stem for p in (ROOT / "models" / "workloads").glob("*.yaml"))

# The fast tier prints a representative few of the sweeps below (a dense training, a pipelined training with
# several phases, a disaggregated service); the whole suite (CI) prints every workload and every cluster. The
# 24,576-GPU cluster's topology table is read in the fast tier by
# test_topology_prints_bandwidths_with_unit_and_direction_and_counts_by_role.
FAST_WORKLOADS = {"llama70b-train-tp8-dp512", "llama70b-train-tp8-pp4-dp32", "llama70b-serve-disaggregated"}
SWEPT = {*HUGE_CLUSTERS, "meta-style-h100-24576"}


def _tier(argv: tuple[str, ...], workload: str) -> object:
    return (argv, True) if workload in FAST_WORKLOADS else pytest.param(argv, True, marks=pytest.mark.slow)


SOURCE = sorted(p.stem for p in (ROOT / "sources").glob("*.yaml"))[0]
# Every command that prints a table, on the shipped data; `computed`: its rates are computed (one unit family),
# not a document's figures (which keep the unit the document states).
TABLE_COMMANDS = [
    (("references",), True),
    (("status",), False),  # its conflicts quote the documents' figures
    (("history", SOURCE), True),
    (("show", "nvidia-dgx-h100"), False),
    (("show", "amd-mi355x-pollara400"), False),
    (("audit", "nvidia-gb200-nvl72", "scale_up.bandwidth_per_accelerator"), False),
    (("query", "SELECT reference_id, field, value_number, digits, unit FROM fields LIMIT 40"), False),
    *((("topology", t), True) for t in ["nvidia-dgx-h100", "nvidia-gb200-nvl72", *CLUSTERS] if t not in SWEPT),
    *(pytest.param(("topology", t), True, marks=pytest.mark.slow) for t in SWEPT),
    (
        (
            "estimate",
            "collective",
            "--op",
            "all-reduce",
            "--ranks",
            "8",
            "--bytes",
            "1GiB",
            "--bandwidth",
            "400Gb/s",
            "--latency",
            "5us",
        ),
        True,
    ),
    (
        (
            "estimate",
            "collective",
            "--topology",
            "nvidia-dgx-h100",
            "--op",
            "all-reduce",
            "--ranks",
            "8",
            "--bytes",
            "1GiB",
        ),
        True,
    ),
    (
        (
            "estimate",
            "collective",
            "--topology",
            "nvidia-dgx-h100",
            "--op",
            "all-gather",
            "--ranks",
            "8",
            "--sweep",
            "8:64M",
        ),
        True,
    ),
    (("estimate", "transfer", "--bytes", "10GB", "--bandwidth", "400Gb/s", "--latency", "5us"), True),
    (("estimate", "memory", "--params", "70B", "--dp", "8", "--zero", "3"), True),
    (
        ("estimate", "activations", "--seq", "8k", "--batch", "1", "--hidden", "8192", "--heads", "64", "--tp", "8"),
        True,
    ),
    (
        (
            "estimate",
            "inference-memory",
            "--params",
            "70B",
            "--layers",
            "80",
            "--kv-heads",
            "8",
            "--head-dim",
            "128",
            "--context",
            "32k",
            "--tp",
            "8",
            "--memory",
            "80GB",
        ),
        True,
    ),
    (
        (
            "estimate",
            "kv",
            "--layers",
            "80",
            "--kv-heads",
            "8",
            "--head-dim",
            "128",
            "--dtype",
            "bf16",
            "--tokens",
            "128k",
        ),
        True,
    ),
    (
        (
            "estimate",
            "capacity",
            "--requests-per-second",
            "20",
            "--output-tokens",
            "500",
            "--group-tokens-per-second",
            "3000",
            "--group-size",
            "8",
            "--headroom",
            "0.2",
        ),
        True,
    ),
    *(_tier(("estimate", "step", "illustrative-h100-4096", w), w) for w in WORKLOADS),
    *(_tier(("estimate", "workload", "illustrative-h100-4096", w), w) for w in WORKLOADS),
    (("estimate", "step", "nvidia-gb200-nvl72", "llama70b-serve-disaggregated"), True),
    (("validate", "--only", "korthikanti"), True),
]


# The calculators that read no checkout (no --root).
CALCULATORS = ("transfer", "memory", "activations", "inference-memory", "kv", "capacity")


def _tables(text: str) -> list[str]:
    """The printed tables, each as one string (a table starts at a line opening with ┏ and ends at └)."""
    found, current = [], None
    for line in text.splitlines():
        if line.startswith("┏"):
            current = []
        if current is not None:
            current.append(line)
            if line.startswith("└"):
                found.append("\n".join(current))
                current = None
    return found


@pytest.mark.parametrize(
    ("argv", "computed"), TABLE_COMMANDS, ids=lambda v: " ".join(v)[:60] if isinstance(v, tuple) else None
)
def test_every_table_prints_numbers_through_the_formatter(built_registry, printed, argv, computed):
    r = printed(*argv, root=None if argv[1:2] and argv[1] in CALCULATORS else built_registry.root)
    assert r.code in (0, 1), r.err  # status and validate may report findings (exit 1); nothing is bad usage
    assert r.out.strip(), r.err
    assert not EXPONENT.search(r.out), (argv, EXPONENT.search(r.out))
    assert not RAW_FLOAT.search(r.out), (argv, RAW_FLOAT.search(r.out))
    assert "None" not in r.out.replace("None of", ""), argv
    if computed:
        for table in _tables(r.out):
            assert not (BITS.search(table) and BYTES.search(table)), (argv, table)


def test_estimate_step_prints_units_not_float_reprs(built_registry, printed):
    """Seen: `estimate step` printed 6.41485e+10 for memory per rank and 1.68309 for seconds."""
    r = printed("estimate", "step", "illustrative-h100-4096", "llama70b-train-tp8-dp512", root=built_registry.root)
    assert r.code == 0, r.err
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip() for line in r.out.splitlines() if "│" in line}
    assert rows["memory_per_rank_bytes"].endswith(" GB") and rows["step_seconds"].endswith(" s")
    assert rows["tokens_per_step"] == "8,388,608"
    assert rows["flops_per_step"].endswith("EFLOP") and rows["tflops_per_accelerator"].endswith("TFLOP/s")
    assert rows["fits"] == "yes"


def test_topology_prints_bandwidths_with_unit_and_direction_and_counts_by_role(built_registry, printed):
    """Seen: `topology` printed 702171.428544 for the bisection and counted 1,536 racks and 3,072 servers as
    `system 4608`."""
    r = printed("topology", "meta-style-h100-24576", root=built_registry.root)
    assert r.code == 0, r.err
    assert "702171" not in r.out
    assert "702 Tb/s per direction" in r.out
    lines = [" ".join(line.replace("│", " ").split()) for line in r.out.splitlines()]
    assert "system (rack) 1,536" in " ".join(lines) and "system (server) 3,072" in " ".join(lines)
    assert "accelerators 24,576" in lines
    assert "spine 7:1" in " ".join(lines)
    data = json.loads(printed("topology", "meta-style-h100-24576", "--json", root=built_registry.root).out)
    assert data["nodes_by_kind_and_role"]["system (rack)"] == 1536
    assert data["bisection_bandwidth_gbps"] == pytest.approx(702171.428544)  # JSON keeps the exact number


@pytest.mark.parametrize(
    ("argv", "key", "expected"),
    [
        (("estimate", "memory", "--params", "70B"), "params", 70e9),
        (("estimate", "memory", "--params", "1.2T"), "params", 1.2e12),
        (("estimate", "memory", "--params", "70e9", "--expert-params", "64B"), "expert_params", 64e9),
        (
            (
                "estimate",
                "kv",
                "--layers",
                "80",
                "--kv-heads",
                "8",
                "--head-dim",
                "128",
                "--dtype",
                "bf16",
                "--tokens",
                "128k",
            ),
            "tokens",
            128_000,
        ),
        (
            (
                "estimate",
                "capacity",
                "--requests-per-second",
                "2",
                "--output-tokens",
                "1k",
                "--group-tokens-per-second",
                "1.5k",
                "--group-size",
                "8",
            ),
            "groups",
            2,
        ),
    ],
)
def test_calculator_options_take_amounts_as_people_write_them(cli, argv, key, expected):
    """Seen: `--params 70B` was refused. One parser (core/units.parse_amount) for parameters, tokens, bytes."""
    r = cli(*argv, "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)[key] == pytest.approx(expected)


@pytest.mark.parametrize("bad", ["70X", "-5B", "70 GB", "B", "1.2.3T"])
def test_a_bad_amount_is_bad_usage_naming_the_option(cli, bad):
    """(nan, inf and negative plain numbers: tests/unit/test_hostile_cli.py.)"""
    r = cli("estimate", "memory", "--params", bad)
    assert r.code == 2 and "--params" in r.err and "70B" in r.err, r.err


def test_a_whole_number_option_refuses_a_fraction(cli):
    r = cli("estimate", "kv", "--layers", "80", "--kv-heads", "8", "--head-dim", "128", "--dtype", "bf16",
            "--tokens", "1.5")  # fmt: skip
    assert r.code == 2 and "--tokens" in r.err and "whole number" in r.err, r.err


def _table_header(text: str) -> list[str]:
    head = next(line for line in text.splitlines() if line.startswith("┃"))
    return [c.strip() for c in head.strip("┃").split("┃")]


def _table_keys(text: str) -> list[str]:
    return [
        line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│") and line.split("│")[1].strip()
    ]


# A training step on a 64-GPU cluster (a fifth of a CPU second), and in the whole suite on the 4,096-GPU one.
STEPS = [
    ("estimate", "step", "illustrative-h100-64", "llama8b-fsdp-dp64"),
    pytest.param(("estimate", "step", "illustrative-h100-4096", "llama70b-train-tp8-dp512"), marks=pytest.mark.slow),
]


@pytest.mark.parametrize("step", STEPS, ids=lambda v: v[2])
def test_json_keeps_the_column_order_of_the_table(built_registry, cli, monkeypatch, step):
    """Seen: `--json` re-sorted the columns alphabetically."""
    root = built_registry.root
    monkeypatch.setenv("COLUMNS", "400")  # wide enough for every table to print as columns, no key wrapped
    keys = list(json.loads(cli(*step, "--json", root=root).out))
    shown = _table_keys(cli(*step, root=root).out)
    assert [k for k in keys if k in shown] == shown
    for argv in (("references",), ("history", SOURCE)):
        table, as_json = cli(*argv, root=root), cli(*argv, "--json", root=root)
        assert list(json.loads(as_json.out)[0]) == _table_header(table.out), argv
    sql = "SELECT unit, reference_id, field FROM fields LIMIT 2"
    rows = json.loads(cli("query", "--format", "json", sql, root=root).out)
    assert list(rows[0]) == ["unit", "reference_id", "field"]
    argv = ("estimate", "transfer", "--bytes", "10GB", "--bandwidth", "400Gb/s", "--latency", "5us")
    assert list(json.loads(cli(*argv, "--json").out)) == _table_keys(cli(*argv).out)


def test_a_reference_field_keeps_its_documents_unit_with_the_bit_rate_beside_it(built_registry, cli, monkeypatch):
    """Seen: TB/s beside Tb/s in one table. A document's figure stays as it states it (NVLink's 1.8 TB/s); a
    network's byte rate gets the bit rate its neighbours are stated in beside it; memory bandwidth stays bytes."""
    monkeypatch.setenv("COLUMNS", "400")
    r = cli("show", "nvidia-gb200-nvl72", root=built_registry.root)
    assert r.code == 0, r.err
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip() for line in r.out.splitlines() if "│" in line}
    assert rows["scale_up.bandwidth_per_accelerator"] == "1.8 TB/s bidirectional (= 14.4 Tb/s bidirectional)"
    assert rows["scale_out.nic.speed"] == "400 Gb/s per direction"
    assert rows["accelerator.memory_bandwidth_total"] == "576 TB/s"
    data = json.loads(cli("show", "nvidia-gb200-nvl72", "--json", root=built_registry.root).out)
    (field,) = [f for f in data if f["field"] == "scale_up.bandwidth_per_accelerator"]
    assert (field["value"], field["unit"]) == (1800.0, "GB/s")  # JSON: the exact number, in the registry's unit


def test_tier_names_are_ascii_identifiers():
    """Seen: tier names used en dashes, so `WHERE tier = 'NIC-leaf'` silently matched nothing."""
    from fabricref.estimate.routing import tier_name

    kinds = ["accelerator", "scale_up_switch", "nic", "leaf", "spine", "core", "cpu", "frontend_switch"]
    assert all(tier_name(a, b).isascii() for a in kinds for b in kinds)
    assert (tier_name("leaf", "nic"), tier_name("spine", "core")) == ("NIC-leaf", "spine-core")


@pytest.mark.slow
def test_the_shipped_traffic_tables_hold_ascii_tiers_a_user_can_type(built_pipeline, cli):
    root = built_pipeline  # a clone run through `dvc repro`: it has the traffic tables
    sql = "SELECT count(*) AS n FROM traffic_links WHERE tier = 'NIC-leaf'"
    assert json.loads(cli("query", "--format", "json", sql, root=root).out)[0]["n"] > 0
    sql = (
        "SELECT DISTINCT tier FROM (SELECT tier FROM traffic_links UNION ALL SELECT tier FROM traffic) "
        "WHERE NOT regexp_matches(tier, '^[ -~]*$')"
    )
    assert json.loads(cli("query", "--format", "json", sql, root=root).out) == []
