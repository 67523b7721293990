"""The compiled registry: hand-checked key figures, audit to verified hashes, read-only SQL."""

from __future__ import annotations

import contextlib
import io
import json

import pytest
from fabricref.core.store import sha256_file

# (reference, field) → (value, unit, direction, status), checked by hand against the vendor documents.
KEY_FIGURES = {
    ("nvidia-dgx-h100", "accelerator.count"): (8, "count", None, "published"),
    ("nvidia-dgx-h100", "accelerator.memory_total"): (640, "GB", None, "published"),
    ("nvidia-dgx-h100", "accelerator.memory"): (80, "GB", None, "published"),  # H100 product page, SXM column
    ("nvidia-dgx-h100", "cpu.count"): (2, "count", None, "published"),
    ("nvidia-dgx-h100", "scale_up.domain_size"): (8, "count", None, "derived"),
    ("nvidia-dgx-h100", "scale_up.switch.count"): (4, "count", None, "published"),
    ("nvidia-dgx-h100", "scale_up.bandwidth_per_accelerator"): (900, "GB/s", "bidirectional", "published"),
    ("nvidia-dgx-h100", "scale_up.aggregate_bandwidth"): (7.2, "TB/s", "bidirectional", "derived"),
    ("nvidia-dgx-h100", "scale_out.nic.count"): (8, "count", None, "published"),
    ("nvidia-dgx-h100", "scale_out.nic.speed"): (400, "Gb/s", "per_direction", "published"),
    ("nvidia-dgx-h100", "scale_out.bandwidth_per_accelerator"): (400, "Gb/s", "per_direction", "derived"),
    ("nvidia-gb200-nvl72", "accelerator.count"): (72, "count", None, "derived"),
    ("nvidia-gb200-nvl72", "cpu.count"): (36, "count", None, "derived"),
    ("nvidia-gb200-nvl72", "tray.compute.count"): (18, "count", None, "published"),
    ("nvidia-gb200-nvl72", "tray.switch.count"): (9, "count", None, "published"),
    ("nvidia-gb200-nvl72", "scale_up.domain_size"): (72, "count", None, "published"),
    ("nvidia-gb200-nvl72", "scale_up.bandwidth_per_accelerator"): (1800, "GB/s", "bidirectional", "published"),
    ("nvidia-gb200-nvl72", "scale_up.aggregate_bandwidth"): (130, "TB/s", "bidirectional", "published"),
    ("nvidia-gb200-nvl72", "scale_out.nic.count"): (72, "count", None, "derived"),
    ("nvidia-gb200-nvl72", "scale_out.nic.speed"): (400, "Gb/s", "per_direction", "published"),
    ("nvidia-gb200-nvl72", "scale_out.bandwidth_per_accelerator"): (400, "Gb/s", "per_direction", "derived"),
    ("nvidia-gb200-nvl72", "frontend.nic.count"): (36, "count", None, "derived"),
    ("nvidia-dgx-b200", "accelerator.count"): (8, "count", None, "published"),
    ("nvidia-dgx-b200", "accelerator.memory_total"): (1440, "GB", None, "published"),
    ("nvidia-dgx-b200", "accelerator.memory"): (180, "GB", None, "derived"),
    ("nvidia-dgx-b200", "scale_up.switch.count"): (2, "count", None, "published"),
    ("nvidia-dgx-b200", "scale_up.bandwidth_per_accelerator"): (1800, "GB/s", "bidirectional", "published"),
    ("nvidia-dgx-b200", "scale_up.aggregate_bandwidth"): (14.4, "TB/s", "bidirectional", "published"),
    ("nvidia-dgx-b200", "scale_out.nic.count"): (8, "count", None, "published"),
    ("nvidia-dgx-b200", "scale_out.nic.speed"): (400, "Gb/s", "per_direction", "published"),
    ("nvidia-dgx-b200", "power.max_system"): (14.3, "kW", None, "published"),
}


def test_the_b200_memory_disagreement_is_resolved_by_the_model_with_a_reason(built_registry, cli):
    result = cli("audit", "nvidia-dgx-b200", "accelerator.memory_total", "--json", root=built_registry.root)
    audit = json.loads(result.out)
    assert audit["chosen"] == "nvidia-dgx-b200-user-guide-introduction#gpu-memory-total"
    assert "1.4TB" in audit["choice_reason"]
    stated = sorted(p["stated"] for p in audit["provenance"])
    assert stated == ["1.4 TB", "1440 GB"]


@pytest.fixture(scope="module")
def key_rows(built_registry) -> dict[tuple[str, str], list[dict]]:
    """The key references' field rows by (reference, field), as `fabricref query --format json` prints them: one
    query for all the key figures."""
    from fabricref.cli import main

    refs = ", ".join(sorted({f"'{ref}'" for ref, _ in KEY_FIGURES}))
    sql = "SELECT reference_id, field, value_number, unit, direction, status FROM fields "
    sql += f"WHERE reference_id IN ({refs})"
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        assert main(["query", "--format", "json", sql, "--root", str(built_registry.root)]) == 0
    rows: dict[tuple[str, str], list[dict]] = {}
    for row in json.loads(printed.getvalue()):
        rows.setdefault((row["reference_id"], row["field"]), []).append(row)
    return rows


@pytest.mark.parametrize(("key", "expected"), sorted(KEY_FIGURES.items()))
def test_key_figures(key_rows, key, expected):
    (row,) = key_rows.get(key, [])
    assert (row["value_number"], row["unit"], row["direction"], row["status"]) == pytest.approx(expected)


def test_audit_of_the_gb200_per_gpu_nvlink_figure_reaches_verified_hashes(built_registry, cli):
    result = cli(
        "audit", "nvidia-gb200-nvl72", "scale_up.bandwidth_per_accelerator", "--json", root=built_registry.root
    )
    assert result.code == 0, result.err
    audit = json.loads(result.out)
    assert {"reference_id", "field", "value", "unit", "status", "provenance"} <= audit.keys()
    assert (audit["value"], audit["unit"], audit["direction"]) == (1800, "GB/s", "bidirectional")
    assert {p["source_id"] for p in audit["provenance"]} == {
        "nvidia-dgx-gb200-user-guide-networking",
        "nvidia-nvlink-page",
    }
    for leaf in audit["provenance"]:
        assert leaf["verified"] is True
        assert sha256_file(built_registry.root / leaf["snapshot_path"]) == leaf["sha256"]
        assert leaf["url"].startswith("https://") and leaf["retrieved_at"] and leaf["locator"] and leaf["excerpt"]
        assert "1.8" in leaf["excerpt"] and "bidirectional" in leaf["excerpt"]


def test_audit_of_a_derived_field_walks_its_inputs(built_registry, cli):
    result = cli("audit", "nvidia-dgx-h100", "scale_out.bandwidth_per_accelerator", "--json", root=built_registry.root)
    audit = json.loads(result.out)
    assert audit["status"] == "derived" and audit["formula"] and audit["confidence"] == "published"
    assert [i["field"] for i in audit["inputs"]] == ["scale_out.nic.count", "scale_out.nic.speed", "accelerator.count"]
    assert all(p["verified"] for i in audit["inputs"] for p in i["provenance"])


def test_audit_reports_an_unknown_with_its_reason(built_registry, cli):
    result = cli("audit", "nvidia-gb200-nvl72", "power.max_system", "--json", root=built_registry.root)
    audit = json.loads(result.out)
    assert audit["status"] == "unknown" and audit["value"] is None and "not stated" in audit["reason"]


def test_audit_of_an_unknown_reference_or_field_is_a_usage_error(built_registry, cli):
    assert cli("audit", "no-such-ref", "x.y", root=built_registry.root).code == 2
    assert cli("audit", "nvidia-dgx-h100", "x.y", root=built_registry.root).code == 2


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO fields (reference_id) VALUES ('x')",
        "UPDATE fields SET value_number = 0",
        "DROP TABLE fields",
        "ATTACH '/tmp/other.duckdb' AS o",
        "COPY fields TO '/tmp/fields.csv'",
        "CREATE TABLE t AS SELECT 1",
        "SELECT 1; DELETE FROM fields",
    ],
)
def test_query_refuses_writes(built_registry, cli, sql):
    result = cli("query", sql, root=built_registry.root)
    assert result.code == 1 and "refused" in result.err


def test_query_cannot_read_files_from_sql(built_registry, cli):
    result = cli("query", "SELECT * FROM read_csv('/etc/passwd')", root=built_registry.root)
    assert result.code == 1 and "disabled" in result.err


def test_query_syntax_error_gives_duckdbs_message(built_registry, cli):
    result = cli("query", "SELEC 1", root=built_registry.root)
    assert result.code == 1 and "Parser Error" in result.err


def test_query_formats_and_provenance_view(built_registry, cli):
    sql = (
        "SELECT reference_id, field, value_number, unit, status, source_id, url, retrieved_at, sha256, locator, "
        "excerpt FROM field_provenance WHERE field = 'scale_up.bandwidth_per_accelerator' AND status = 'published' "
        "ORDER BY 1, 6"
    )
    rows = json.loads(cli("query", "--format", "json", sql, root=built_registry.root).out)
    assert {r["reference_id"] for r in rows} >= {"nvidia-dgx-h100", "nvidia-dgx-b200", "nvidia-gb200-nvl72"}
    assert all(len(r["sha256"]) == 64 and r["excerpt"] for r in rows)
    csv_out = cli("query", "--format", "csv", "SELECT 1 AS a, 'x' AS b", root=built_registry.root).out
    assert csv_out == "a,b\n1,x\n"
    assert cli("query", "--format", "xml", "SELECT 1", root=built_registry.root).code == 2


def test_queries_read_the_parquet_without_the_duckdb_file(built_copy, cli):
    """The DuckDB file is only for direct readers (tests/unit/test_dvc_deps.py): `fabricref` reads the Parquet."""
    built_copy.duckdb_path.unlink()
    assert cli("references", "--json", root=built_copy.root).code == 0
    assert not built_copy.duckdb_path.exists()


def test_help_lists_the_subcommands(cli):
    result = cli("--help")
    assert result.code == 0
    for verb in ("retrieve", "extract", "compile", "audit", "query", "references", "show", "history", "pin"):
        assert verb in result.out
    assert cli("no-such-verb").code == 2


def test_origin_says_what_each_hash_proves_in_the_view_show_and_audit(built_registry, cli):
    # The shipped pins are all transcriptions: every citation in the view must say so.
    sql = "SELECT DISTINCT origin FROM field_provenance WHERE source_id IS NOT NULL"
    rows = json.loads(cli("query", "--format", "json", sql, root=built_registry.root).out)
    assert rows == [{"origin": "transcription"}]
    shown = json.loads(cli("show", "nvidia-dgx-h100", "--json", root=built_registry.root).out)
    count = next(r for r in shown if r["field"] == "accelerator.count")
    assert count["source"] == (
        "nvidia-dgx-basepod-core-components (vendor-document, transcription), "
        "nvidia-hgx-h100-blog (vendor-document, transcription)"
    )
    tree = cli("audit", "nvidia-dgx-h100", "accelerator.count", root=built_registry.root).out
    assert "transcription" in tree and "transcription of the page is unchanged" in tree
