"""The audit's promise: a citation's hash proves its bytes are the ones pinned, so bytes that changed after
pinning are reported, never passed as verified. Two ways to change them: a byte flipped in the snapshot store,
and a transcription edited under sources/transcriptions/ without pinning it again. Each is tried on a private
copy of a built checkout (`built_copy`), against `fabricref audit` (a stated and a derived field), `audit
--revision`, and `fabricref status`."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from fabricref.core import pins
from fabricref.core.paths import Layout

# A stated field resting on one transcription, and a derived field of the same reference whose inputs do.
STATED = ("nvidia-dgx-h100", "scale_up.bandwidth_per_accelerator")
DERIVED = ("nvidia-dgx-h100", "scale_out.bandwidth_per_accelerator")


def _flip_a_byte(lay: Layout, source_id: str) -> None:
    """One bit of the stored snapshot of the source's pinned revision flipped, its size kept."""
    path = lay.store_dir / "sha256" / _current(lay, source_id)[:2] / _current(lay, source_id)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.chmod(0o644)
    path.write_bytes(bytes(data))


def _edit_transcription(lay: Layout, source_id: str) -> None:
    path = lay.transcription_file(source_id)
    text = path.read_text()
    edited = text.replace("900 gigabytes", "950 gigabytes")
    assert edited != text, "the transcription no longer states the figure this test edits"
    path.write_text(edited)


TAMPERINGS = {"store byte flipped": _flip_a_byte, "transcription edited": _edit_transcription}


def _current(lay: Layout, source_id: str) -> str:
    history = pins.load(lay, source_id)
    assert history is not None
    return history.current.sha256


def _source_of(cli: Callable[..., object], lay: Layout) -> str:
    """The source the stated field cites, as audit reports it on the untouched copy (verified there)."""
    result = cli("audit", *STATED, "--json", root=lay.root)
    assert result.code == 0, result.err
    (leaf,) = json.loads(result.out)["provenance"]
    assert leaf["verified"] is True and leaf["problem"] is None and leaf["origin"] == "transcription"
    return leaf["source_id"]


def _leaves(node: dict) -> list[dict]:
    return [*node["provenance"], *(leaf for child in node.get("inputs", []) for leaf in _leaves(child))]


@pytest.fixture(params=sorted(TAMPERINGS))
def tampered(request: pytest.FixtureRequest, built_copy: Layout, cli) -> tuple[Layout, str, str]:
    """(checkout, source id, what was done): a built checkout whose cited source was tampered with after
    pinning."""
    source_id = _source_of(cli, built_copy)
    TAMPERINGS[request.param](built_copy, source_id)
    return built_copy, source_id, request.param


@pytest.mark.parametrize("reference_field", [STATED, DERIVED], ids=["stated", "derived"])
def test_audit_reports_a_tampered_snapshot_as_not_verified(tampered, reference_field, cli) -> None:
    lay, source_id, how = tampered
    expected = "hash mismatch" if how == "store byte flipped" else "edited since it was pinned"

    text = cli("audit", *reference_field, root=lay.root)
    assert text.code == 1, text.out
    tree = re.sub(r"[\s│├└─]+", " ", text.out)  # the tree as one line: a long problem wraps with the terminal
    assert f"{source_id} rule" in tree and "NOT VERIFIED" in tree and expected in tree
    assert f"not verified: {source_id} revision 1: " in text.err and expected in text.err

    as_json = cli("audit", *reference_field, "--json", root=lay.root)
    assert as_json.code == 1
    bad = [leaf for leaf in _leaves(json.loads(as_json.out)) if leaf["source_id"] == source_id]
    assert bad and all(leaf["verified"] is False and expected in leaf["problem"] for leaf in bad)


def test_audit_at_a_revision_reports_a_tampered_snapshot(tampered, cli) -> None:
    lay, source_id, _ = tampered
    result = cli("audit", *STATED, "--revision", "1", "--json", root=lay.root)
    assert result.code == 1
    (leaf,) = json.loads(result.out)["provenance"]
    assert leaf["source_id"] == source_id and leaf["verified"] is False and leaf["problem"]


@pytest.mark.slow
def test_status_names_the_tampered_source_and_exits_non_zero(tampered, cli) -> None:
    lay, source_id, how = tampered
    result = cli("status", "--json", root=lay.root)
    assert result.code == 1
    data = json.loads(result.out)
    named = [line for line in data["attention"] if line.startswith(f"source {source_id} revision 1: ")]
    assert len(named) == 1, data["attention"]
    (row,) = [s for s in data["sources"] if s["source_id"] == source_id]
    if how == "store byte flipped":
        assert row["hash_ok"] is False and "hash mismatch" in named[0]
    else:
        assert row["hash_ok"] is True and row["transcription_ok"] is False and "edited since" in named[0]

    table = cli("status", root=lay.root)
    assert table.code == 1 and f"needs attention: source {source_id} revision 1: " in table.said


@pytest.mark.slow
def test_an_untouched_copy_is_verified_and_needs_no_attention(built_copy: Layout, cli) -> None:
    """The control: the same checks pass before anything is tampered with."""
    for reference_field in (STATED, DERIVED):
        result = cli("audit", *reference_field, "--json", root=built_copy.root)
        assert result.code == 0, result.err
        assert all(leaf["verified"] for leaf in _leaves(json.loads(result.out)))
    assert cli("status", root=built_copy.root).code == 0


def test_the_store_path_flipped_is_the_one_audit_cites(built_copy: Layout, cli) -> None:
    """The tampering above hits the file audit re-hashes, not a neighbour of it."""
    source_id = _source_of(cli, built_copy)
    (leaf,) = json.loads(cli("audit", *STATED, "--json", root=built_copy.root).out)["provenance"]
    sha = _current(built_copy, source_id)
    assert Path(leaf["snapshot_path"]) == (built_copy.store_dir / "sha256" / sha[:2] / sha).relative_to(built_copy.root)
