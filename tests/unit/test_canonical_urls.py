"""Canonical URLs only: no source and no pin's current revision records user info or a private, loopback,
link-local or tailnet host."""

from __future__ import annotations

import json
import re

import pytest
from conftest import ROOT
from fabricref.core.schemas import load_yaml
from fabricref.core.sources import load_source
from fabricref.core.urls import url_problem
from fabricref.errors import ValidationError

SOURCE = """\
id: demo-doc
url: {url}
publisher: Example
publisher_kind: vendor-document
title: Demo document
document_type: datasheet
media_type: text/html
status: published
{extra}rules:
  - id: gpus
    field: accelerator.count
    subject: Demo
    select: {{row: GPUs}}
    parse: {{type: count}}
"""


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("https://marks-mac-mini.tail20af9f.ts.net/article/119778", "private or personal host"),
        ("https://user:secret@docs.example.com/x", "user info"),
        ("https://token@docs.example.com/x", "user info"),
        ("http://127.0.0.1:8080/x", "loopback"),
        ("http://[::1]/x", "loopback"),
        ("http://localhost/x", "private or personal host"),
        ("http://169.254.169.254/latest", "link-local"),
        ("http://[fe80::1]/x", "link-local"),
        ("http://100.101.102.103/x", "tailnet"),
        ("http://100.127.255.254/x", "tailnet"),
        ("http://10.0.0.5/x", "private or reserved"),
        ("http://192.168.1.10/x", "private or reserved"),
        ("http://172.16.0.1/x", "private or reserved"),
        ("http://[fd7a:115c:a1e0::1]/x", "private or reserved"),
        ("http://nas.local/x", "private or personal host"),
        ("http://mirror/x", "single-label"),
        ("ftp://docs.example.com/x", "scheme"),
        # What the HTTP client would refuse at refresh is refused when the source is loaded.
        ("https://docs.example.com/\x7f", "not a URL the HTTP client can fetch"),
        ("https://docs.example.com/a b", "space"),
        ("https://docs.example.com/a\tb", "space"),
        ("https://docs.example.com:0/x", "port 0"),
        ("https://docs.example.com:99999/x", "not a valid URL"),
        ("https://docs.example.com../x", "empty label"),
        ("https://docs.example.com\u3002./x", "empty label"),
        ("https://docs.example.com/\ud800", "not a URL the HTTP client can fetch"),
    ],
)
def test_non_canonical_urls_are_refused_with_the_reason(url, said):
    problem = url_problem(url)
    assert problem is not None and said in problem


@pytest.mark.parametrize(
    "url",
    [
        "https://docs.nvidia.com/dgx/dgxb200-user-guide/introduction-to-dgxb200.html",
        "https://www.tomshardware.com/tech-industry/a-b",
        "http://100.63.255.255/x",  # just below 100.64.0.0/10
        "http://100.128.0.0/x",  # just above it
        "https://8.8.8.8/x",
        "https://docs.example.com/a%20b?q=1#part",
        "https://docs.example.com./x",  # one trailing dot: the root, as DNS writes it
    ],
)
def test_public_urls_pass(url):
    assert url_problem(url) is None


def test_a_source_with_a_tailnet_url_is_refused_naming_the_file_and_path(tmp_path):
    path = tmp_path / "demo-doc.yaml"
    path.write_text(SOURCE.format(url="https://box.tail1234.ts.net/page", extra=""))
    with pytest.raises(ValidationError, match=r"demo-doc\.yaml: at \$\.url: .*private or personal host"):
        load_source(path)


def test_read_via_describes_a_copy_without_giving_its_address(tmp_path):
    path = tmp_path / "demo-doc.yaml"
    path.write_text(SOURCE.format(url="https://example.com/d", extra="read_via: a stored copy of the page\n"))
    assert load_source(path).read_via == "a stored copy of the page"
    path.write_text(SOURCE.format(url="https://example.com/d", extra="read_via: https://box.tail1.ts.net/d\n"))
    with pytest.raises(ValidationError, match=r"read_via.*give no address"):
        load_source(path)


def test_shipped_sources_and_current_pins_record_canonical_urls_only():
    sources = sorted((ROOT / "sources").glob("*.yaml"))
    assert sources
    bad = []
    for path in sources:
        data, _ = load_yaml(path)
        pin = ROOT / "sources" / "pins" / f"{path.stem}.json"
        current = json.loads(pin.read_text())["revisions"][-1]
        if "url" not in data:  # only a design statement may have none, and then its pin records none either
            if data["publisher_kind"] != "design-statement" or current["url"] or current["final_url"]:
                bad.append(f"{path.name}: no url, but not a design statement pinned without one")
            continue
        if problem := url_problem(data["url"]):
            bad.append(f"{path.name}: url {problem}")
        for key in ("url", "final_url"):
            if problem := url_problem(current[key]):
                bad.append(f"{pin.name}: current revision {key} {problem}")
    assert bad == []


def test_no_shipped_source_invents_an_address():
    # A reserved or made-up host (.invalid, .example, .test) is a fake address: a source without one has no url.
    fake = [
        p.name
        for p in sorted((ROOT / "sources").glob("*.yaml"))
        if re.search(r"url:\s*\S+\.(invalid|example|test|localhost)(/|\s)", p.read_text())
    ]
    assert fake == []


DESIGN = """\
id: demo-statement
publisher: Demo project
publisher_kind: {kind}
title: Demo design statement
document_type: {doc}
media_type: text/html
status: preliminary
rules:
  - id: design
    field: scale_out.logical_design
    subject: Demo
    select: {{css: "#statement"}}
    parse: {{type: text}}
"""


def test_a_design_statement_has_no_url_and_is_its_id_and_hash(tmp_path):
    path = tmp_path / "demo-statement.yaml"
    path.write_text(DESIGN.format(kind="design-statement", doc="design-statement"))
    assert load_source(path).url is None


def test_only_a_design_statement_may_have_no_url_and_the_error_says_so(tmp_path):
    path = tmp_path / "demo-statement.yaml"
    path.write_text(
        DESIGN.format(kind="vendor-document", doc="datasheet").replace("status: preliminary", "status: published")
    )
    with pytest.raises(ValidationError, match=r"demo-statement\.yaml.*url: required.*only a design statement"):
        load_source(path)
