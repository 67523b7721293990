"""The robustness catalog (docs/robustness.md): hostile and broken inputs each give a clear error naming the
file / URL / field and what was expected, and leave pins, store and registry exactly as they were."""

from __future__ import annotations

import gzip
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import FEW_SOURCES, STATED, env_with_venv
from fabricref.compile import stage as compile_stage
from fabricref.core.files import exclusive_lock
from fabricref.core.pins import lock_path
from fabricref.core.schemas import validate
from fabricref.core.sources import load_source, load_sources
from fabricref.errors import CompileError, FabricrefError, ValidationError
from fabricref.extract.stage import run as extract
from fabricref.retrieve import stage
from fabricref.retrieve.fetch import FetchPolicy, fetch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_retrieve import DOC_PATH, PAGE_V1, add_source, state
from werkzeug import Request, Response

FAST = FetchPolicy(connect_timeout=1, read_timeout=1, deadline=5, attempts=2, backoff=0.01)
URL = "https://example.test/docs/page.html"


class RawServer:
    """A socket server on 127.0.0.1 that answers every connection with the same raw bytes, then closes."""

    def __init__(self, raw: bytes) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.raw = raw
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self) -> None:
        for _ in range(8):
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                conn.sendall(self.raw)

    def close(self) -> None:
        self.sock.close()


def test_connection_refused_is_named():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(FabricrefError, match=rf"127\.0\.0\.1:{port}.*cannot connect"):
        fetch(URL, "text/html", mirror=f"http://127.0.0.1:{port}", policy=FAST)


def test_dns_failure_is_named():
    with pytest.raises(FabricrefError, match=r"no-such-host\.invalid.*cannot connect"):
        fetch(URL, "text/html", mirror="http://no-such-host.invalid", policy=FAST)


def test_truncated_body_is_refused():
    server = RawServer(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 1000\r\n\r\n<html>short")
    try:
        with pytest.raises(FabricrefError, match="connection broke off"):
            fetch(URL, "text/html", mirror=server.url, policy=FAST)
    finally:
        server.close()


def test_missing_content_type_is_refused():
    server = RawServer(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\n<html>")
    try:
        with pytest.raises(FabricrefError, match="no Content-Type; expected text/html"):
            fetch(URL, "text/html", mirror=server.url, policy=FAST)
    finally:
        server.close()


def test_slow_drip_is_bounded_by_the_total_deadline(httpserver, hold):
    def drip(_: Request) -> Response:
        def body():
            for _ in range(60):  # 6 s in all; every byte well within the read timeout
                yield b"x"
                if hold(0.1):  # the test has ended: stop dripping
                    return

        return Response(body(), content_type="text/html")

    httpserver.expect_request(DOC_PATH).respond_with_handler(drip)
    policy = FetchPolicy(connect_timeout=1, read_timeout=2, deadline=0.5, attempts=1)
    started = time.monotonic()
    with pytest.raises(FabricrefError, match=r"total deadline of 0\.5s exceeded"):
        fetch(URL, "text/html", mirror=httpserver.url_for("/"), policy=policy)
    assert time.monotonic() - started < 3


def test_redirect_loop_is_refused(httpserver):
    httpserver.expect_request(DOC_PATH).respond_with_data("", status=302, headers={"Location": "/example.test/b"})
    httpserver.expect_request("/example.test/b").respond_with_data("", status=302, headers={"Location": DOC_PATH})
    with pytest.raises(FabricrefError, match="more than 5 redirects"):
        fetch(URL, "text/html", mirror=httpserver.url_for("/"), policy=FAST)


def test_gzip_bomb_is_bounded_after_decompression(httpserver):
    bomb = gzip.compress(b"\0" * (20 * 1024 * 1024))
    assert len(bomb) < 100_000
    httpserver.expect_request(DOC_PATH).respond_with_data(
        bomb, content_type="text/html", headers={"Content-Encoding": "gzip"}
    )
    policy = FetchPolicy(connect_timeout=1, read_timeout=2, deadline=10, attempts=1, max_bytes=1024 * 1024)
    with pytest.raises(FabricrefError, match="exceeds the limit of 1048576 bytes \\(decoded\\)"):
        fetch(URL, "text/html", mirror=httpserver.url_for("/"), policy=policy)


def test_mis_declared_charset_still_extracts(few_sources, tmp_path):
    add_source(few_sources)
    (source,) = load_sources(few_sources, "example-doc")
    body = "<html><head><meta charset='utf-8'></head><body><p>Caf\xe9 \u201cquoted\u201d</p><table><tr><th>GPUs</th>"
    body += "<td>8</td></tr></table></body></html>"
    f = tmp_path / "latin1.html"
    f.write_bytes(body.encode("cp1252"))  # declared utf-8, actually cp1252
    stage.pin_file(few_sources, source, f, "2026-11-29T00:00:00Z")
    extract(few_sources, [source])
    claims = (few_sources.claims_dir / "example-doc.json").read_text()
    assert '"value_number": 8.0' in claims


def test_two_refreshes_at_once_refuse_or_wait(few_sources, httpserver):
    add_source(few_sources)
    httpserver.expect_request(DOC_PATH).respond_with_data(PAGE_V1, content_type="text/html")
    with exclusive_lock(lock_path(few_sources)), pytest.raises(FabricrefError, match="another fabricref process holds"):
        stage.refresh(
            few_sources,
            load_sources(few_sources, "example-doc"),
            mirror=httpserver.url_for("/"),
            policy=FAST,
            wait_for_lock=False,
        )
    (outcome,) = stage.refresh(
        few_sources, load_sources(few_sources, "example-doc"), mirror=httpserver.url_for("/"), policy=FAST
    )
    assert outcome.action == "new-revision"


def test_killed_refresh_leaves_no_partial_snapshot_or_pin(few_sources, httpserver, hold):
    add_source(few_sources)
    streaming = threading.Event()

    def drip(_: Request) -> Response:
        def body():
            yield b"<html><body><table><tr><th>GPUs</th><td>8</td></tr></table>"
            for n in range(100):  # 10 s in all
                if n == 3:
                    streaming.set()  # the client has been reading the body for 0.3 s: it is in the middle of it
                if hold(0.1):  # the test has ended
                    return
                yield b"<!-- more -->"

        return Response(body(), content_type="text/html")

    httpserver.expect_request(DOC_PATH).respond_with_handler(drip)
    before = state(few_sources)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fabricref.cli",
            "retrieve",
            "--refresh",
            "--source",
            "example-doc",
            "--mirror",
            httpserver.url_for("/"),
            "--root",
            str(few_sources.root),
        ],
        env=env_with_venv(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while not streaming.wait(0.05):  # kill it in the middle of the body, not at a fixed time
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        assert time.monotonic() < deadline, "the refresh never got to the body"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    assert state(few_sources) == before
    leftovers = [p for p in Path(few_sources.store_dir).rglob("*") if p.is_file() and p.name.startswith(".")]
    assert leftovers == []


def test_failing_disk_write_changes_nothing(few_sources, httpserver):
    add_source(few_sources)
    httpserver.expect_request(DOC_PATH).respond_with_data(PAGE_V1, content_type="text/html")
    before = state(few_sources)
    store = Path(few_sources.store_dir) / "sha256"
    aside = None
    if os.geteuid() == 0:  # root ignores directory modes: make the fan-out directory a file instead
        import hashlib
        import shutil
        import tempfile

        fan = store / hashlib.sha256(PAGE_V1).hexdigest()[:2]
        fan.parent.mkdir(parents=True, exist_ok=True)
        if fan.is_dir():  # a shipped snapshot shares the fan-out: set it aside, outside the checkout, meanwhile
            aside = Path(tempfile.mkdtemp()) / fan.name
            shutil.move(fan, aside)
        fan.write_text("not a directory")
        before = state(few_sources)
    else:
        store.chmod(0o555)
    try:
        with pytest.raises(FabricrefError, match="cannot write"):
            stage.refresh(
                few_sources, load_sources(few_sources, "example-doc"), mirror=httpserver.url_for("/"), policy=FAST
            )
        assert state(few_sources) == before
    finally:
        store.chmod(0o755)
        if aside is not None:
            fan.unlink()
            shutil.move(aside, fan)


def test_hand_edited_pins_file_names_file_and_line(few_sources, cli):
    path = few_sources.pins_file(FEW_SOURCES[0])
    path.write_text(path.read_text().replace('"revision": 1', '"revision": 1,,'))
    result = cli("retrieve", root=few_sources.root)
    assert result.code == 1 and f"{path}:" in result.err and "invalid JSON" in result.err


def test_duplicate_rule_ids_and_bad_counts(tmp_path):
    base = Path(__file__).parent / "data_source.yaml"
    text = """\
id: demo
url: https://example.test/d.html
publisher: Example
publisher_kind: vendor-document
title: Demo document
document_type: datasheet
media_type: text/html
status: published
rules:
  - {id: a, field: accelerator.count, subject: srv, select: {row: GPUs}, parse: {type: count}}
  - {id: a, field: cpu.count, subject: srv, select: {row: CPUs}, parse: {type: count}}
"""
    path = tmp_path / "demo.yaml"
    path.write_text(text)
    with pytest.raises(ValidationError, match=r"at \$\.rules\[1\]\.id: duplicate rule id 'a'"):
        load_source(path)
    assert not base.exists()


@pytest.mark.slow
def test_non_whole_derived_count_and_infinite_assumption_are_refused(repo):
    extract(repo, load_sources(repo))
    path = repo.references_dir / "nvidia-dgx-h100.yaml"
    original = path.read_text()
    path.write_text(original.replace("formula: accelerator.count\n", "formula: accelerator.count / 3\n", 1))
    with pytest.raises(CompileError, match="a count must be a whole non-negative number, got 2.66667"):
        compile_stage.run(repo)
    amd = repo.references_dir / "amd-mi300x-pollara400.yaml"
    amd.write_text(amd.read_text().replace("value: 128\n", "value: .inf\n"))
    path.write_text(original)
    with pytest.raises(ValidationError, match="NaN or infinite number"):
        compile_stage.run(repo)


def test_a_status_that_contradicts_its_provenance_is_invalid():
    record = {**STATED, "provenance": []}  # published, yet no document stated it
    with pytest.raises(ValidationError, match="should have at least 1 item"):
        validate(record, "field.schema.json", "record")
    unknown = {**record, "status": "unknown", "confidence": "unknown", "reason": "nobody states it"}
    with pytest.raises(ValidationError, match="value_number: as `unknown`: Input should be None"):
        validate(unknown, "field.schema.json", "record")
    derived = {**record, "status": "derived", "formula": "a.c * 2", "inputs": []}
    with pytest.raises(ValidationError):
        validate(derived, "field.schema.json", "record")


@pytest.mark.slow
def test_a_failed_compile_leaves_the_registry_as_it_was(built_registry, repo):
    for verb in (stage.verify,):
        verb(repo, load_sources(repo))
    extract(repo, load_sources(repo))
    compile_stage.run(repo)
    before = {p.name: p.read_bytes() for p in repo.tables_dir.glob("*.parquet")}
    path = repo.references_dir / "nvidia-dgx-h100.yaml"
    path.write_text(path.read_text().replace("nvidia-hgx-h100-blog#hgx-h100-nvlink-bandwidth]", "nope#nope]"))
    with pytest.raises(CompileError):
        compile_stage.run(repo)
    assert {p.name: p.read_bytes() for p in repo.tables_dir.glob("*.parquet")} == before


SLUG = st.text(alphabet="abcdefghij-0123456789/._ ", min_size=0, max_size=12)
VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    id_=SLUG, rules=VALUE, extra=st.dictionaries(st.sampled_from(["url", "status", "parse", "x"]), VALUE, max_size=2)
)
def test_random_source_files_validate_or_fail_clearly(tmp_path, id_, rules, extra):
    import json

    data = {
        "id": id_,
        "url": "https://e.test/x",
        "publisher": "E",
        "publisher_kind": "vendor-document",
        "title": "Title",
        "document_type": "datasheet",
        "media_type": "text/html",
        "status": "published",
        "rules": rules,
        **extra,
    }
    path = tmp_path / "f.yaml"
    path.write_text(json.dumps(data, allow_nan=True))
    try:
        load_source(path)
    except ValidationError as exc:
        assert str(exc)
