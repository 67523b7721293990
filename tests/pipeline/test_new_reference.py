"""`fabricref new reference`: one command gives a model that compiles, with every field to be sourced."""

from __future__ import annotations

import json

import pytest


def applicable_keys(root, form_factor: str) -> list[str]:
    vocab = json.loads((root / "schemas" / "vocabulary.json").read_text())["fields"]
    return sorted(k for k, spec in vocab.items() if form_factor in spec["applies_to"])


@pytest.mark.slow
@pytest.mark.parametrize("form_factor", ["server", "rack", "cluster", "switch", "nic"])
def test_new_reference_compiles_and_shows_its_unknowns(repo, cli, form_factor):
    ids_before = (repo.root / "models" / "identities.json").read_text().splitlines()
    made = cli("new", "reference", "acme-x1", "--form-factor", form_factor, "--title", "Acme X1", root=repo.root)
    assert made.code == 0, made.err
    ids_after = (repo.root / "models" / "identities.json").read_text().splitlines()
    assert sorted(set(ids_after) - set(ids_before)) == ['    "acme-x1": {"kind": "vendor", "title": "Acme X1"},']
    assert (repo.root / "models" / "revisions" / "references" / "acme-x1.json").is_file()

    for verb in ("retrieve", "extract", "compile"):
        result = cli(verb, root=repo.root)
        assert result.code == 0, result.err
    shown = json.loads(cli("show", "acme-x1", "--json", root=repo.root).out)
    expected = applicable_keys(repo.root, form_factor)
    assert len(expected) > 5
    assert [(r["field"], r["status"], r["source"]) for r in shown] == [
        (k, "unknown", "to be sourced") for k in expected
    ]
    table = cli("show", "acme-x1", root=repo.root).out
    assert "to be sourced" in table and expected[0] in table
    status = cli("status", "--json", root=repo.root)
    assert status.code == 0, status.out  # the model's first revision is pinned: nothing needs attention


def test_an_id_in_use_or_a_bad_argument_is_refused_and_nothing_is_written(no_sources, cli):
    models = no_sources.root / "models"
    before = {p: p.read_bytes() for p in models.rglob("*") if p.is_file()}
    existing = sorted((models / "references").glob("*.yaml"))[0].stem
    cases = [
        (existing, "server", "Some Title", f"id {existing!r} is already in use"),
        ("Bad_Id", "server", "Some Title", "reference id"),
        ("acme-x2", "blade", "Some Title", "--form-factor 'blade': expected one of server, rack, cluster"),
        ("acme-x3", "server", "X", "title"),
    ]
    for ref_id, form_factor, title, message in cases:
        result = cli("new", "reference", ref_id, "--form-factor", form_factor, "--title", title, root=no_sources.root)
        assert result.code == 2, (ref_id, result.err)
        assert message in result.err
    assert {p: p.read_bytes() for p in models.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize("title", ["1e1", ".inf", "0o17", "1_000", "null", "yes", "2026-01-02"])
def test_a_title_that_reads_like_a_number_is_written_as_the_text_it_is(no_sources, cli, title):
    """Seen: the title `1e1` was written unquoted (a YAML 1.1 writer), then read back (YAML 1.2) as the number 10."""
    from fabricref.core.schemas import load_yaml

    made = cli("new", "reference", "acme-x1", "--form-factor", "server", "--title", title, root=no_sources.root)
    assert made.code == 0, made.err
    data, _ = load_yaml(no_sources.references_dir / "acme-x1.yaml")
    assert data["title"] == title
