"""Hostile input, round 3: bounded work, and the small inputs that were silently wrong or unclear. A knob or a
cluster that would take gigabytes is refused fast naming params.yaml:LINE or the model's path; a workload listing
a target twice or sharing with itself is refused naming the file and key."""

from __future__ import annotations

import contextlib
import re
import threading
import tracemalloc
from collections.abc import Iterator

import pytest
from fabricref.errors import CompileError, ValidationError
from fabricref.estimate.workloads import find_workload, load_workload


@contextlib.contextmanager
def at_most_mb(limit: int) -> Iterator[None]:
    """Refused before the work is done: the Python and NumPy memory allocated inside stays under `limit` MB (what
    a refusal costs, not the gigabytes the input asks for; a count, so a loaded machine cannot flake it)."""
    tracemalloc.start()
    try:
        yield
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < limit * 2**20, f"{peak / 2**20:.0f} MB allocated before the refusal; expected under {limit} MB"


def set_knob(root, workload: str, knob: str, value: str) -> int:
    """params.yaml's `workloads.<workload>.<knob>` set to `value`; returns its line."""
    path = root / "params.yaml"
    lines = path.read_text().splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.rstrip() == f"  {workload}:")
    for i in range(start + 1, len(lines)):
        if re.match(rf"^    {knob}:", lines[i]):
            lines[i] = f"    {knob}: {value}\n"
            path.write_text("".join(lines))
            return i + 1
        if not lines[i].startswith("    "):
            break
    raise AssertionError(f"{workload}.{knob} not in params.yaml")


@pytest.mark.parametrize(
    ("workload", "knob", "value", "said"),
    [
        ("llama8b-fsdp-dp64", "dp", "1000000000", "1,000,000,000 is too large; expected at most 65,536"),
        ("llama70b-train-tp8-pp4-dp32", "dp", "65536", "ranks; expected at most 1,048,576"),
        ("llama8b-fsdp-dp64", "microbatches", "1000000000", "is too large; expected at most 16,777,216"),
        ("llama8b-fsdp-dp64", "seq_len", "1000000000", "is too large"),
        ("llama70b-serve-aggregated", "prompt_tokens", "1000000000", "is too large"),
        ("llama70b-serve-aggregated", "tp", "1000000", "is too large"),
    ],
)
def test_a_knob_that_would_take_gigabytes_is_refused_fast_at_its_params_line(no_sources, workload, knob, value, said):
    line = set_knob(no_sources.root, workload, knob, value)
    with at_most_mb(64), pytest.raises(ValidationError) as caught:
        find_workload(no_sources, workload)
    message = str(caught.value)
    assert f"params.yaml:{line}: at $.workloads.{workload}." in message and said in message, message


def test_a_divisibility_error_of_a_params_knob_names_its_line(no_sources):
    line = set_knob(no_sources.root, "llama70b-train-tp8-dp512", "tp", "7")
    with pytest.raises(
        ValidationError, match=rf"params\.yaml:{line}: at \$\.workloads\.llama70b-train-tp8-dp512\.tp: 7 must divide"
    ):
        find_workload(no_sources, "llama70b-train-tp8-dp512")


@pytest.mark.parametrize("value", ["5e-324", "2.0e-310", "-1e-320"])
def test_a_subnormal_number_in_params_yaml_is_refused_at_its_line(no_sources, value):
    path = no_sources.root / "params.yaml"
    text = path.read_text()
    path.write_text(text.replace("requests_per_second: 100", f"requests_per_second: {value}", 1))
    line = next(
        i for i, t in enumerate(path.read_text().splitlines(), 1) if t.strip().startswith("requests_per_second")
    )
    with pytest.raises(
        ValidationError,
        match=rf"params\.yaml:{line}: at \$\.workloads\..*requests_per_second: .*a subnormal number.*too close to 0",
    ):
        find_workload(no_sources, "llama70b-serve-aggregated")


def test_a_workload_listing_a_target_twice_is_refused(no_sources):
    path = no_sources.root / "models" / "workloads" / "llama70b-train-tp8-dp512.yaml"
    path.write_text(
        path.read_text().replace(
            "targets: [illustrative-h100-4096,", "targets: [illustrative-h100-4096, illustrative-h100-4096,"
        )
    )
    with pytest.raises(
        ValidationError, match=r"llama70b-train-tp8-dp512\.yaml: at \$\.targets: illustrative-h100-4096 listed twice"
    ):
        load_workload(path)


def test_a_workload_sharing_with_itself_names_the_file_and_shares_with(no_sources):
    path = no_sources.root / "models" / "workloads" / "llama70b-train-tp8-dp512.yaml"
    text = path.read_text()
    text = re.sub(r"^shares_with: .*$", "", text, flags=re.M) + "shares_with: llama70b-train-tp8-dp512\n"
    path.write_text(text)
    with pytest.raises(
        ValidationError, match=r"llama70b-train-tp8-dp512\.yaml: at \$\.shares_with: .* is this workload itself"
    ):
        load_workload(path)


@pytest.mark.parametrize(
    ("block", "count"), [("nvidia-gb200-nvl72", 65536), ("amd-helios", 65536), ("nvidia-dgx-h100", 65536)]
)
def test_a_cluster_whose_blocks_make_too_many_nodes_is_refused_fast(built_copy, block, count):
    """65,536 blocks is inside the block cap; of NVL72 racks it is 13 million nodes (8 GB, then out of memory)."""
    from fabricref.topology import stage

    src = built_copy.root / "models" / "clusters" / "amd-helios-vulcano800-2tier-1152.yaml"
    text = src.read_text().replace("building_block: amd-helios", f"building_block: {block}")
    text = text.replace("building_blocks: 16", f"building_blocks: {count}")
    text = text.replace("id: amd-helios-vulcano800-2tier-1152", "id: huge-cluster")
    (built_copy.root / "models" / "clusters" / "huge-cluster.yaml").write_text(text)
    with (
        at_most_mb(256),
        pytest.raises(
            CompileError,
            match=r"huge-cluster\.yaml: at \$\.building_blocks: 65,536 blocks of .* expected at most 500,000 nodes",
        ),
    ):
        stage.build(built_copy, "huge-cluster")


def test_the_python_api_writes_nothing(built_copy, monkeypatch):
    """Documented as writing nothing, it wrote registry/registry.duckdb and views.json (and so failed on a
    read-only checkout where the CLI worked): every file the API opens for writing inside the checkout is
    recorded here, and there must be none."""
    import os
    import sys

    import fabricref

    built_copy.duckdb_path.unlink(missing_ok=True)
    (built_copy.registry_dir / "views.json").unlink(missing_ok=True)
    root = str(built_copy.root.resolve())
    written: list[str] = []
    watching = [True]

    def hook(event, args):
        if watching[0] and event == "open" and isinstance(args[0], (str, os.PathLike)):
            path, mode, flags = args
            writes = (
                (flags or 0) & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)
                if mode is None
                else any(c in str(mode) for c in "wax+")
            )
            if writes and os.path.abspath(os.fsdecode(path)).startswith(root):
                written.append(os.fsdecode(path))

    sys.addaudithook(hook)
    try:
        with fabricref.registry(built_copy.root) as con:
            assert con.execute("SELECT count(*) FROM fields").fetchone()[0] > 0
        fabricref.graph("nvidia-dgx-h100", built_copy.root)
        fabricref.audit("nvidia-dgx-h100", "accelerator.count", built_copy.root)
    finally:
        watching[0] = False
    assert written == []
    assert not built_copy.duckdb_path.exists() and not (built_copy.registry_dir / "views.json").exists()


def test_an_os_error_escaping_a_command_is_one_line_naming_the_file(cli, monkeypatch, no_sources):
    """A read-only checkout under `fabricref report` raised an OSError traceback: whatever verb meets one, it is
    an error naming the file and what it means."""
    import errno

    from fabricref.inspect import status as status_module

    def read_only(lay):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(lay.root / "registry" / "report" / "index.html"))

    import os

    monkeypatch.setattr(status_module, "status", read_only)
    result = cli("status", root=no_sources.root)
    assert result.code == 1 and "Traceback" not in result.err
    assert (
        "registry/report/index.html: Read-only file system (the checkout is on a read-only file system)" in result.err
    )


@pytest.mark.parametrize("what", ["fifo", "dev-zero"])
def test_a_declarative_file_that_is_a_fifo_or_a_device_is_refused_not_waited_on(no_sources, what):
    import os

    from fabricref.core.sources import load_sources

    path = no_sources.sources_dir / "zz-odd.yaml"
    if what == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    # In a thread: a reader that waited on the FIFO (or read /dev/zero to its end) would never return, and the
    # test says so instead of hanging the suite.
    outcome: list[BaseException] = []

    def read() -> None:
        try:
            load_sources(no_sources)
        except BaseException as exc:  # handed to the test thread
            outcome.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(120)
    assert not reader.is_alive(), "load_sources waited on a file that is not a regular file"
    assert len(outcome) == 1 and isinstance(outcome[0], ValidationError), outcome
    assert re.search(r"zz-odd\.yaml: not a regular file", str(outcome[0]))
