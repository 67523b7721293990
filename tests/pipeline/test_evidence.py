"""One evidence policy: only a vendor's own documents and press releases may make a field `published`;
press, resellers, measurements, maintainers' statements and design statements give at most `preliminary`."""

from __future__ import annotations

import pytest
from conftest import copy_checkout
from fabricref.cli import main
from fabricref.compile.stage import check_evidence
from fabricref.core.evidence import MAY_STATE
from fabricref.core.paths import Layout
from fabricref.core.sources import load_sources
from fabricref.errors import CompileError

HELIOS = "tomshardware-amd-helios-computex-2026"


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    """A copy of the checkout's data and its sources, loaded once for the module's tests (none changes them)."""
    lay = Layout(copy_checkout(tmp_path_factory.mktemp("evidence") / "repo"))
    return lay, load_sources(lay)


def with_edited(shipped, repo, source_id):
    """The shipped sources with `source_id` loaded again from `repo`, where the test has edited it."""
    (edited,) = load_sources(repo, only=source_id)
    return [edited if s.id == source_id else s for s in shipped[1]]


def test_the_policy_table():
    vendor = {k for k, allowed in MAY_STATE.items() if "published" in allowed}
    assert vendor == {"vendor-document", "vendor-press-release"}
    assert all(allowed == ("preliminary",) for k, allowed in MAY_STATE.items() if k not in vendor)


def test_every_shipped_source_names_a_publisher_kind_its_status_respects(shipped):
    repo, sources = shipped
    assert sources
    check_evidence(repo, sources, {})  # raises on any conflict
    press = [s.id for s in sources if s.document_type == "press-coverage"]
    assert press and all(s.publisher_kind == "press" for s in sources if s.id in press)


@pytest.mark.slow
def test_a_press_source_set_to_published_is_a_compile_error_naming_file_and_path(repo, cli):
    path = repo.root / "sources" / f"{HELIOS}.yaml"
    path.write_text(path.read_text().replace("\nstatus: preliminary\n", "\nstatus: published\n"))
    assert main(["extract", "--root", str(repo.root)]) == 0
    result = cli("compile", root=repo.root)
    assert result.code == 1
    assert f"sources/{HELIOS}.yaml: at $.status: 'published'" in result.err
    assert "publisher_kind 'press' may make a field only preliminary" in result.err


def test_a_rule_status_override_is_held_to_the_same_policy(shipped, repo):
    path = repo.root / "sources" / f"{HELIOS}.yaml"
    text = path.read_text().replace(
        "    parse: {type: text, pattern: '(?P<value>Instinct MI455X)'}\n",
        "    parse: {type: text, pattern: '(?P<value>Instinct MI455X)'}\n    status: published\n",
    )
    path.write_text(text)
    with pytest.raises(CompileError, match=r"at \$\.rules\[1\]\.status: 'published'"):
        check_evidence(repo, with_edited(shipped, repo, HELIOS), {})


def test_a_claim_that_outranks_its_source_kind_is_refused(shipped):
    repo, sources = shipped
    claim = {"source_id": HELIOS, "rule_id": "helios-gpu-count", "status": "published"}
    with pytest.raises(CompileError, match=rf"registry/claims/{HELIOS}\.json: claim {HELIOS}#helios-gpu-count"):
        check_evidence(repo, sources, {f"{HELIOS}#helios-gpu-count": claim})


def test_press_coverage_must_say_it_is_press(shipped, repo):
    path = repo.root / "sources" / f"{HELIOS}.yaml"
    path.write_text(path.read_text().replace("publisher_kind: press\n", "publisher_kind: vendor-document\n"))
    with pytest.raises(CompileError, match=r"at \$\.publisher_kind: 'vendor-document'.*press-coverage"):
        check_evidence(repo, with_edited(shipped, repo, HELIOS), {})


def test_every_published_field_has_a_vendor_citation_in_the_registry(built_registry, cli):
    import json

    sql = (
        "SELECT reference_id, field FROM field_provenance WHERE status = 'published' AND source_id IS NOT NULL "
        "GROUP BY ALL HAVING count(*) FILTER (WHERE publisher_kind LIKE 'vendor-%') = 0"
    )
    result = cli("query", "--format", "json", sql, root=built_registry.root)
    assert result.code == 0, result.err
    assert json.loads(result.out) == []
    kinds = json.loads(
        cli("query", "--format", "json", "SELECT DISTINCT publisher_kind FROM sources", root=built_registry.root).out
    )
    assert {k["publisher_kind"] for k in kinds} == {
        "vendor-document",
        "press",
        "reseller",
        "maintainer-statement",
        "design-statement",
    }


DESIGN = "fabricref-design-statement-amd-scale-out"


def test_a_design_statement_selects_and_is_never_published(built_registry, cli):
    import json

    sql = (
        "SELECT reference_id, field, status, publisher_kind FROM field_provenance "
        "WHERE field = 'scale_out.logical_design' AND source_id IS NOT NULL ORDER BY reference_id"
    )
    rows = json.loads(cli("query", "--format", "json", sql, root=built_registry.root).out)
    assert {r["reference_id"] for r in rows} == {
        "amd-helios",
        "amd-mi300x-pollara400",
        "amd-mi325x-pollara400",
        "amd-mi355x-pollara400",
    }
    assert {(r["status"], r["publisher_kind"]) for r in rows} == {("preliminary", "design-statement")}


@pytest.mark.slow
def test_a_design_statement_set_to_published_or_mislabelled_is_refused(shipped, repo):
    path = repo.root / "sources" / f"{DESIGN}.yaml"
    original = path.read_text()
    path.write_text(original.replace("\nstatus: preliminary\n", "\nstatus: published\n"))
    with pytest.raises(CompileError, match=r"at \$\.status: 'published'.*publisher_kind 'design-statement'"):
        check_evidence(repo, with_edited(shipped, repo, DESIGN), {})
    path.write_text(original.replace("document_type: design-statement\n", "document_type: announcement\n"))
    with pytest.raises(CompileError, match="a design statement is publisher_kind design-statement"):
        check_evidence(repo, with_edited(shipped, repo, DESIGN), {})


def test_a_design_statement_has_no_url_and_every_view_says_what_identifies_it(built_registry, cli):
    import json

    (row,) = json.loads(
        cli(
            "query",
            "--format",
            "json",
            f"SELECT url FROM sources WHERE source_id = '{DESIGN}'",
            root=built_registry.root,
        ).out
    )
    assert row["url"] is None
    (snap,) = json.loads(
        cli(
            "query",
            "--format",
            "json",
            f"SELECT url, final_url, sha256 FROM snapshots WHERE source_id = '{DESIGN}' AND is_current",
            root=built_registry.root,
        ).out
    )
    assert snap["url"] is None and snap["final_url"] is None
    audit = cli("audit", "amd-helios", "scale_out.logical_design", root=built_registry.root)
    assert audit.code == 0
    flat = "".join(c for c in audit.out if c not in "│ \n")  # the tree wraps long lines at the terminal's width
    assert "url:noURL:adesignstatement,identifiedbyitsidandtheSHA-256ofitspinnedtranscription" in flat
    assert snap["sha256"] in flat


def test_a_refresh_has_nothing_to_fetch_for_a_design_statement(repo):
    from fabricref.retrieve.stage import refresh

    (source,) = load_sources(repo, only=DESIGN)
    (outcome,) = refresh(repo, [source])
    assert outcome.action == "unchanged" and "no URL to fetch" in outcome.detail and outcome.revision == 2
