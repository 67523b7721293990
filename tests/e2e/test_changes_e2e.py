"""Sources change: refresh through a mirror on 127.0.0.1, dvc repro, history, diff, audit --revision, and a
rule that stops matching — in a copy of the session's built clone (conftest.pipeline_copy), so the repository's own
pins are never touched and no cold `dvc repro` of its own is needed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import env_with_venv

pytestmark = pytest.mark.slow
# Everything asserted here (history, diff, audit, status) reads the registry compile writes: the topology,
# traffic and report stages downstream would only add minutes, so only compile and what it needs run.
STAGES = ["compile"]

SOURCE = "nvidia-hgx-h100-blog"
PATH = (
    "/developer.nvidia.com/blog/introducing-nvidia-hgx-h100-an-accelerated-server-platform-for-ai-and-"
    "high-performance-computing/"
)


def run(cmd: list[str], cwd: Path, ok: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, cwd=cwd, env=env_with_venv(), capture_output=True, text=True, timeout=900)
    if ok:
        assert done.returncode == 0, f"{' '.join(cmd)}:\n{done.stdout}\n{done.stderr}"
    return done


def refresh(cli, root: Path, server) -> str:
    result = cli("retrieve", "--refresh", "--source", SOURCE, "--mirror", server.url_for("/"), root=root)
    assert result.code == 0, result.err
    return result.out


def json_of(cli, *args: str, root: Path):
    """`fabricref ARGS --json` in this process (conftest.cli): the commands read what the `dvc repro` runs wrote."""
    result = cli(*args, "--json", root=root)
    assert result.code == 0, result.err
    return json.loads(result.out)


def test_sources_change_end_to_end(pipeline_copy, httpserver, cli):
    root = pipeline_copy  # built by the cold `dvc repro`: the step 1 status below finds it up to date
    original = (root / "sources" / "transcriptions" / f"{SOURCE}.html").read_bytes()
    pins_file = root / "sources" / "pins" / f"{SOURCE}.json"

    # 1. Unchanged bytes: no revision, nothing downstream reruns.
    httpserver.expect_oneshot_request(PATH).respond_with_data(original, content_type="text/html")
    assert "unchanged" in refresh(cli, root, httpserver)
    assert len(json.loads(pins_file.read_text())["revisions"]) == 1
    assert "up to date" in run(["dvc", "status", *STAGES], root).stdout

    # 2. A corrected figure: a new revision, and dvc repro reruns the stages downstream of the change.
    changed = original.replace(b"900 gigabytes", b"950 gigabytes")
    httpserver.expect_oneshot_request(PATH).respond_with_data(
        changed, content_type="text/html", headers={"ETag": '"r2"'}
    )
    assert "new-revision" in refresh(cli, root, httpserver)
    out = run(["dvc", "repro", *STAGES], root).stdout
    assert "Running stage 'extract'" in out and "Running stage 'compile'" in out
    history = json_of(cli, "history", SOURCE, root=root)
    assert [h["revision"] for h in history] == [1, 2]
    assert [h["origin"] for h in history] == ["transcription", "retrieved"] and history[1]["etag"] == '"r2"'
    diff = json_of(cli, "diff", SOURCE, root=root)
    moved = {c["rule"]: c for c in diff["changed"]}
    assert moved["hgx-h100-nvlink-bandwidth"]["change"] == "value changed"
    assert moved["hgx-h100-nvlink-bandwidth"]["old"] == "900 GB/s bidirectional"
    assert moved["hgx-h100-nvlink-bandwidth"]["new"] == "950 GB/s bidirectional"
    assert len(diff["changed"]) == 1
    # Other shipped sources may have a second revision of their own: the refreshed one must be among them.
    everything = {d["source_id"]: d for d in json_of(cli, "diff", "--all", root=root)}
    assert everything[SOURCE]["changed"] == diff["changed"]
    field = ["nvidia-dgx-h100", "scale_up.bandwidth_per_accelerator"]
    now = json_of(cli, "audit", *field, root=root)
    then = json_of(cli, "audit", *field, "--revision", "1", root=root)
    assert now["value"] == 950 and then["value"] == 900
    assert then["provenance"][0]["sha256"] == history[0]["sha256"] and then["provenance"][0]["verified"]
    assert now["provenance"][0]["sha256"] == history[1]["sha256"] and now["provenance"][0]["verified"]

    # 3. The page is restructured: the rule no longer matches; the run fails with a per-field report.
    restructured = changed.replace(b"GPU-to-GPU communication", b"GPU communication")
    httpserver.expect_oneshot_request(PATH).respond_with_data(restructured, content_type="text/html")
    assert "new-revision" in refresh(cli, root, httpserver)
    failed = run(["dvc", "repro", *STAGES], root, ok=False)
    assert failed.returncode != 0
    report = failed.stdout + failed.stderr
    assert (
        f"source {SOURCE} revision 3 rule hgx-h100-nvlink-bandwidth (table row 'GPU-to-GPU communication')" in report
    ) and "matched nothing" in report
    assert cli("status", root=root).code == 1

    # 4. An explicit, declared choice keeps the previous revision's value; the record says so, with both hashes.
    src = root / "sources" / f"{SOURCE}.yaml"
    text = src.read_text().replace(
        "  - id: hgx-h100-nvlink-bandwidth\n", "  - id: hgx-h100-nvlink-bandwidth\n    on_no_match: keep-previous\n"
    )
    src.write_text(text)
    run(["dvc", "repro", *STAGES], root)
    kept = json_of(cli, "audit", *field, root=root)
    leaf = kept["provenance"][0]
    assert kept["value"] == 950 and leaf["carried_from_revision"] == 2 and leaf["revision"] == 2
    assert leaf["sha256"] == history[1]["sha256"]
    rev3 = json_of(cli, "history", SOURCE, root=root)[2]["sha256"]
    assert f"revision 3, sha256 {rev3}" in leaf["stated"]
    assert cli("status", root=root).code == 0
