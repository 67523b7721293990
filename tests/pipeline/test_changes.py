"""Revisions, diffs, status and model revisions (fast cases; the end-to-end loop is in test_changes_e2e)."""

from __future__ import annotations

import json

from fabricref.core import model_revisions
from fabricref.core.sources import load_sources
from fabricref.inspect.changes import diff
from fabricref.retrieve.stage import pin_file

SOURCE = """\
id: announce-doc
url: https://example.test/announce.html
publisher: Example (press)
publisher_kind: vendor-press-release
title: An announcement
document_type: announcement
media_type: text/html
status: published
read_on: 2026-11-29
rules:
  - id: nic-speed
    field: scale_out.nic.speed
    subject: Example NIC
    select: {row: Speed}
    parse: {type: quantity, pattern: '(?P<value>\\d+) (?P<unit>Gb/s)', direction: per_direction}
    preliminary_when: 'expected|up to|planned'
  - id: nic-model
    field: scale_out.nic.model
    subject: Example NIC
    select: {row: Model}
    parse: {type: text}
"""


def page(speed: str, model: str | None = "X1") -> bytes:
    rows = f"<tr><th>Speed</th><td>{speed}</td></tr>"
    if model:
        rows += f"<tr><th>Model</th><td>{model}</td></tr>"
    return f"<html><body><table>{rows}</table></body></html>".encode()


def test_diff_reports_status_value_added_and_removed(repo, tmp_path):
    (repo.sources_dir / "announce-doc.yaml").write_text(SOURCE)
    (source,) = load_sources(repo, "announce-doc")
    for i, body in enumerate([page("expected 800 Gb/s", None), page("800 Gb/s"), page("1600 Gb/s", None)], 1):
        f = tmp_path / f"r{i}.html"
        f.write_bytes(body)
        pin_file(repo, source, f, f"2026-11-2{i}T00:00:00Z")
    first = {c["rule"]: c for c in diff(repo, "announce-doc", 1, 2)["changes"]}
    assert first["nic-speed"]["change"] == "status changed"
    assert (first["nic-speed"]["old_status"], first["nic-speed"]["new_status"]) == ("preliminary", "published")
    assert first["nic-model"]["change"] == "added" and first["nic-model"]["new"] == "X1"
    second = {c["rule"]: c for c in diff(repo, "announce-doc")["changes"]}  # default: latest vs the one before
    assert second["nic-speed"]["change"] == "value changed"
    assert (second["nic-speed"]["old"], second["nic-speed"]["new"]) == (
        "800 Gb/s per direction",
        "1.6 Tb/s per direction",
    )
    assert second["nic-model"]["change"] == "removed" and "matched nothing" in second["nic-model"]["detail"]


def test_status_guards_ci(built_copy, cli):
    repo = built_copy  # retrieve, extract and compile already run on the shipped data
    ok = cli("status", "--json", root=repo.root)
    assert ok.code == 0, ok.err
    data = json.loads(ok.out)
    assert all(s["hash_ok"] and s["rules_ok"] for s in data["sources"])
    gb200 = next(r for r in data["references"] if r["reference_id"] == "nvidia-gb200-nvl72")
    assert "power.max_system" in gb200["unknowns"] and gb200["by_status"]["published"] > 10
    # A failing rule needs attention.
    path = repo.source_file("nvidia-nvlink-page")
    path.write_text(path.read_text().replace("select: {row: NVLink}", "select: {row: NVLink 5}"))
    bad = cli("status", "--json", root=repo.root)
    assert bad.code == 1 and "nvlink-bandwidth-per-gpu" in bad.out


def test_model_revisions_are_kept_and_an_unpinned_change_needs_attention(built_copy, cli):
    repo = built_copy  # retrieve and extract already run; the model change below needs compile only
    model = "references/nvidia-dgx-h100"
    before = [r["revision"] for r in model_revisions.history(repo, model)]
    assert before == list(range(1, len(before) + 1))
    n = len(before)
    path = repo.references_dir / "nvidia-dgx-h100.yaml"
    path.write_text(
        path.read_text().replace("No vendor document read states a price;", "No vendor page states a price;")
    )
    assert cli("compile", root=repo.root).code == 0
    result = cli("status", root=repo.root)
    assert result.code == 1 and "model references/nvidia-dgx-h100 changed" in result.out
    assert cli("pin-model", "nvidia-dgx-h100", root=repo.root).code == 0
    revs = model_revisions.history(repo, model)
    assert [r["revision"] for r in revs] == [*before, n + 1] and revs[-2]["sha256"] != revs[-1]["sha256"]
    assert cli("compile", root=repo.root).code == 0
    rows = json.loads(
        cli(
            "query",
            "--format",
            "json",
            f"SELECT * FROM model_revisions WHERE model = '{model}' ORDER BY revision",
            root=repo.root,
        ).out
    )
    assert [(r["revision"], r["is_current"], r["pinned"]) for r in rows] == [
        *((k, False, True) for k in before),
        (n + 1, True, True),
    ]
    assert cli("status", root=repo.root).code == 0


def test_diff_table_prints_a_dash_for_what_one_revision_lacks(repo, tmp_path, cli, monkeypatch):
    """Seen: `diff` printed `None → published` for a field the older revision did not have."""
    monkeypatch.setenv("COLUMNS", "400")  # one row per line
    (repo.sources_dir / "announce-doc.yaml").write_text(SOURCE)
    (source,) = load_sources(repo, "announce-doc")
    for i, body in enumerate([page("800 Gb/s", None), page("800 Gb/s")], 1):
        f = tmp_path / f"r{i}.html"
        f.write_bytes(body)
        pin_file(repo, source, f, f"2026-11-2{i}T00:00:00Z")
    r = cli("diff", "announce-doc", "--from", "1", "--to", "2", root=repo.root)
    assert r.code == 0, r.err
    (row,) = [line for line in r.out.splitlines() if "nic-model" in line]
    assert "None" not in r.out
    assert [c.strip() for c in row.strip("│").split("│")][2:] == ["added", "—", "X1", "— → published"]
