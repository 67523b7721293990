"""The one value formatter: expectations written by hand from the unit definitions, not computed."""

from __future__ import annotations

import pytest
from fabricref.core.format import format_count, format_distinct, format_quantity


@pytest.mark.parametrize(
    ("value", "unit", "direction", "expected"),
    [
        # decimal bytes: SI prefixes, 3 significant digits
        (1.26e12, "B", None, "1.26 TB"),
        (1260, "GB", None, "1.26 TB"),
        (640, "GB", None, "640 GB"),
        (999.7, "GB", None, "1 TB"),  # rounds up into the next prefix, never "1e+03 GB"
        (-2500, "MB", None, "-2.5 GB"),
        (0.5, "B", None, "0.5 B"),
        # binary bytes stay binary: IEC prefixes, factor 1024
        (80, "GiB", None, "80 GiB"),
        (1536, "GiB", None, "1.5 TiB"),
        (1024, "KiB/s", None, "1 MiB/s"),
        # bits stay bits, bytes stay bytes; direction spelled out
        (400, "Gb/s", "per_direction", "400 Gb/s per direction"),
        (800, "Gbps", "per_direction", "800 Gb/s per direction"),
        (1600, "Gb/s", None, "1.6 Tb/s"),
        (3350, "GB/s", None, "3.35 TB/s"),
        (900, "GB/s", "bidirectional", "900 GB/s bidirectional"),
        (0, "Gb/s", "per_direction", "0 Gb/s per direction"),
        # time: s, ms, µs, ns
        (4.9, "s", None, "4.9 s"),
        (7e-5, "s", None, "70 µs"),
        (0.07, "ms", None, "70 µs"),
        (5, "us", None, "5 µs"),
        (1500, "ns", None, "1.5 µs"),
        (0.0123456, "s", None, "12.3 ms"),
        (12345, "s", None, "12,300 s"),  # 3 significant digits, separators, no exponent
        # power
        (120, "kW", None, "120 kW"),
        (132000, "W", None, "132 kW"),
        # counts: exact with thousands separators
        (18432, "count", None, "18,432"),
        (72, None, None, "72"),
        (70e9, "count", None, "70,000,000,000"),
        (1.5, "count", None, "1.5"),
        # no value, text values, units not rescaled
        (None, "GB/s", "per_direction", "—"),
        ("HBM3e", None, None, "HBM3e"),
        (7.25, "%", None, "7.25 %"),
    ],
)
def test_format_quantity(value, unit, direction, expected):
    assert format_quantity(value, unit, direction) == expected


def test_more_digits_on_request():
    assert format_quantity(1801, "GB/s", digits=4) == "1.801 TB/s"
    assert format_count(2.71828, digits=2) == "2.7"


def test_a_diff_never_prints_two_different_values_the_same():
    assert format_distinct(1800, 1801, "GB/s") == ("1.8 TB/s", "1.801 TB/s")
    assert format_distinct(900, 900, "GB/s", "bidirectional") == ("900 GB/s bidirectional",) * 2
    assert format_distinct(None, 400, "Gb/s", "per_direction") == ("—", "400 Gb/s per direction")
