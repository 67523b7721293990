"""Hostile input, round 3: measured logs that are silently wrong are refused with file:line, what is read is
bounded, and a calibration number claiming `measured` needs the pinned log it was read from."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
from fabricref.errors import FabricrefError, UsageError, ValidationError
from fabricref.estimate.measured import measurement_id
from fabricref.estimate.nccl_log import MAX_ROWS, parse_text
from test_measured import FIXTURES, RING, _replace_cell, _row_line

LOG = FIXTURES / "dgx-h100-8gpu-all-reduce-ring.log"


def lines_of(text: str, needle: str) -> list[int]:
    return [i for i, line in enumerate(text.splitlines(), 1) if needle in line]


@pytest.mark.parametrize(
    ("column", "value", "said"),
    [
        (0, "-268435456", "size and count must be whole numbers"),
        (1, "-5", "size and count must be whole numbers"),
        (0, str(2**53 + 1), "from 0 to 2**53"),
        (0, "٢٦٨٤٣٥٤٥٦", "size and count must be whole numbers"),  # Arabic-Indic digits int() accepts
        (0, "268_435_456", "size and count must be whole numbers"),  # underscores int() accepts
        (4, str(2**40), "root must be"),
        (8, "²", "#wrong must be a count"),  # was an int() ValueError traceback
        (8, "-1", "#wrong must be a count"),
        (5, "1_342.18", "time must be a number"),
        (5, "infinity", "time must be a finite non-negative number"),
        (5, "-1342.18", "time must be a finite non-negative number"),
    ],
)
def test_cells_nccl_tests_never_prints_are_refused_with_the_line(column, value, said):
    pattern = re.escape(said)
    with pytest.raises(ValidationError, match=rf"x\.log:{_row_line(RING, 2)}: .*{pattern}"):
        parse_text(_replace_cell(RING, 2, column, value), "x.log")


@pytest.mark.parametrize(
    ("char", "shown"),
    [
        ("\x00", "control character U+0000 ␀"),
        ("\x1b", "control character U+001B ␛"),
        ("\x0c", "control character U+000C ␌"),
        ("\u2028", "control character U+2028"),
        ("\u200e", "invisible format character U+200E"),  # in a host name, one host becomes two
        ("\u200b", "invisible format character U+200B"),
        ("\ufeff", "invisible format character U+FEFF"),  # not where a byte-order mark stands
    ],
)
def test_a_log_holding_a_control_character_is_refused_naming_line_and_column(char, shown):
    """A NUL (a binary or truncated file), an escape sequence or a line break str.splitlines splits at but
    nccl-tests never writes: refused where it stands, not read as a rank line or row gone missing."""
    line = _row_line(RING, 2)
    rows = RING.splitlines()
    rows[line - 1] = rows[line - 1][:6] + char + rows[line - 1][6:]
    said = rf"x\.log:{line}: column 7 holds the {re.escape(shown)}"
    with pytest.raises(ValidationError, match=said):
        parse_text("\r\n".join(rows), "x.log")  # CRLF line ends are text: the line is still counted right


def test_a_byte_order_mark_opening_a_log_is_dropped_and_bad_utf8_names_its_line():
    from fabricref.estimate.nccl_log import parse_bytes

    assert parse_bytes(b"\xef\xbb\xbf" + RING.encode(), "x.log").rows == parse_text(RING, "x.log").rows
    data = RING.encode().replace(b"#  Rank  3", b"#  Rank \xff3")
    line = lines_of(RING, "#  Rank  3")[0]
    with pytest.raises(
        ValidationError, match=rf"x\.log:{line}: not UTF-8 text \(invalid start byte at byte \d+, column 9"
    ):
        parse_bytes(data, "x.log")


def test_a_size_measured_twice_is_refused():
    rows = [line for line in RING.splitlines() if line.strip() and not line.startswith("#")]
    contradicting = rows[1].replace("2609.79", "1304.90").replace("205.71", "411.42").replace("360.00", "719.99")
    text = RING.replace(rows[2], f"{rows[2]}\n{contradicting}")
    with pytest.raises(ValidationError, match=r"x\.log:\d+: size 536870912 .* measured twice \(line \d+ and here\)"):
        parse_text(text, "x.log")


def test_rank_lines_listed_twice_are_refused():
    rank_lines = [line for line in RING.splitlines() if line.startswith("#  Rank")]
    doubled = RING.replace(rank_lines[-1], "\n".join([rank_lines[-1], *rank_lines]))
    with pytest.raises(ValidationError, match=r"x\.log:\d+: rank 0 is listed twice \(line \d+ and here\)"):
        parse_text(doubled, "x.log")
    renumbered = RING.replace("Rank  7", "Rank  9")
    with pytest.raises(ValidationError, match=r"list ranks 0, 1, 2, 3, 4, 5, 6, 9; expected 0 to 7"):
        parse_text(renumbered, "x.log")


def test_two_runs_concatenated_are_refused():
    with pytest.raises(ValidationError, match=r"x\.log:\d+: .*two runs concatenated"):
        parse_text(RING + RING, "x.log")
    second_header = RING.split("# Out of bounds")[0] + "\n".join(RING.splitlines()[22:30]) + "\n"
    with pytest.raises(ValidationError, match=r"two runs concatenated"):
        parse_text(second_header, "x.log")


def test_busbw_inconsistent_with_algbw_is_refused_at_small_sizes_too():
    small = (FIXTURES / "dgx-h100-8gpu-all-reduce-small.log").read_text()
    assert parse_text(small, "s.log")  # the real two-decimal rounding passes
    row = next(line for line in small.splitlines() if line.strip() and not line.startswith("#"))
    cells = row.split()
    algbw = float(cells[6])
    assert algbw < 1  # the size the old check skipped
    cells[7] = f"{algbw * 1.75 + 0.2:.2f}"
    with pytest.raises(ValidationError, match=r"busbw .* is not algbw × 1\.75"):
        parse_text(small.replace(row, "  ".join(cells)), "s.log")


def test_a_log_over_the_row_cap_is_refused_fast():
    head = RING.split("   268435456")[0]
    rows = []
    for i in range(1, MAX_ROWS + 2):
        size = 4 * i
        t = 10.0
        algbw = size / (t * 1e3)
        rows.append(
            f"{size} {i} float sum -1 {t:.2f} {algbw:.2f} {algbw * 1.75:.2f} 0 {t:.2f} {algbw:.2f} {algbw * 1.75:.2f} 0"
        )
    started = time.monotonic()
    with pytest.raises(ValidationError, match=rf"more than {MAX_ROWS:,} result rows"):
        parse_text(head + "\n".join(rows) + "\n", "big.log")
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory", "huge"])
def test_importing_what_is_not_a_log_file_is_a_clear_error_not_a_hang(built_copy, cli, tmp_path, kind):
    if kind == "fifo":
        path = tmp_path / "log.fifo"
        os.mkfifo(path)
    elif kind == "dev-zero":
        path = Path("/dev/zero")
    elif kind == "directory":
        path = tmp_path
    else:
        path = tmp_path / "huge.log"
        path.write_bytes(RING.encode() + b"#" * (5 * 1024 * 1024))
    started = time.monotonic()
    result = cli("measured", "import", str(path), "--topology", "nvidia-dgx-h100", root=built_copy.root)
    assert result.code == 2, result.err
    said = {"fifo": "not a regular file", "dev-zero": "not a regular file", "directory": "is a directory"}
    assert said.get(kind, "at most") in result.err and "Traceback" not in result.err
    assert time.monotonic() - started < 10


def test_the_same_bytes_under_a_new_file_name_are_the_same_measurement(built_copy, cli, tmp_path):
    first = cli("measured", "import", str(LOG), "--topology", "nvidia-dgx-h100", root=built_copy.root)
    assert first.code == 0, first.err
    renamed = tmp_path / "renamed.log"
    renamed.write_bytes(LOG.read_bytes())
    again = cli("measured", "import", str(renamed), "--topology", "nvidia-dgx-h100", root=built_copy.root)
    assert again.code == 0, again.err
    assert "already pinned renamed.log" in again.out and f"imported earlier as {LOG.name}" in again.out
    other = cli(
        "measured", "import", str(renamed), "--topology", "nvidia-dgx-h100", "--algorithm", "tree", root=built_copy.root
    )
    assert other.code == 2 and "algorithm 'tree' (pinned: None)" in other.err and "algorithm None)" not in other.err


CLAIMED = """\
    efficiency:
      value: 0.99
      status: measured
      measured_sha256: {sha}
"""


def _claim_measured(root: Path, sha: str) -> Path:
    path = root / "models" / "calibration" / "collectives.yaml"
    text = path.read_text()
    old = (
        "    efficiency:\n      value: 0.822\n      status: published\n      source: nccl-tests-issue-212\n"
        "      note: 370 GB/s effective ring busbw / 450 GB/s line rate per direction.\n"
    )
    assert old in text
    path.write_text(text.replace(old, CLAIMED.format(sha=sha), 1))
    return path


def test_a_calibration_number_claiming_measured_needs_a_pinned_log(built_copy, cli):
    """{value: 0.99, status: measured, measured_sha256: <any 64 hex>} raised the estimate's confidence from
    assumed to measured and moved busbw 724 -> 868 GB/s with no such log."""
    from fabricref.estimate.calibration import load_calibration

    # A log is pinned (the import itself reads the calibration), then the claim names another hash: refused.
    assert cli("measured", "import", str(LOG), "--topology", "nvidia-dgx-h100", root=built_copy.root).code == 0
    path = _claim_measured(built_copy.root, "ab" * 32)
    field = r"\$\.link_classes\.nvlink4\.efficiency\.measured_sha256"
    with pytest.raises(ValidationError, match=rf"collectives\.yaml:\d+: at {field}: {'ab' * 32} names no measured log"):
        load_calibration(built_copy.root)
    args = ("estimate", "collective", "--op", "all-reduce", "--ranks", "8", "--topology", "nvidia-dgx-h100")
    estimate = cli(*args, "--bytes", "1GiB", root=built_copy.root)
    assert estimate.code == 1 and "measured_sha256" in estimate.err, estimate.err
    # The claim naming the pinned log's hash: accepted.
    (pin,) = (built_copy.root / "sources" / "measured").glob("*.json")
    sha = json.loads(pin.read_text())["sha256"]
    path.write_text(path.read_text().replace("ab" * 32, sha))
    assert load_calibration(built_copy.root).number("link_classes.nvlink4.efficiency").value == 0.99


def test_every_error_of_the_parser_is_a_fabricref_error():
    for text in ("", "#\n", RING.replace("float", "\x00"), RING.replace("sum", "²")):
        with pytest.raises(FabricrefError):
            parse_text(text, "x.log")


def test_a_topology_id_too_long_to_name_a_measurement_is_a_usage_error():
    """The measurement id is `<topology>-<op>-<12 hex>`, a slug of at most 80 characters: a topology id that
    leaves it no room is refused by name, not by a validation error of the pin the import would build."""
    sha = "0123456789ab" + "0" * 52
    assert measurement_id("a" * 56, "all-reduce", sha) == "a" * 56 + "-all-reduce-0123456789ab"
    with pytest.raises(UsageError) as err:
        measurement_id("a" * 57, "all-reduce", sha)
    said = str(err.value)
    assert said.startswith(f"--topology {'a' * 57}: 57 characters;") and "`-all-reduce-0123456789ab`" in said
    assert "at most 80 characters in all" in said and "can have at most 56" in said
