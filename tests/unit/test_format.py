"""The one value formatter: expectations written by hand from the unit definitions, not computed."""

from __future__ import annotations

import pytest
from fabricref.core.format import (
    format_count,
    format_distinct,
    format_field,
    format_percent,
    format_quantity,
    significant_digits,
)


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


@pytest.mark.parametrize(
    ("text", "digits"),
    [
        ("1,307.4 TFLOPS", 5),
        ("1307.4 TFLOPS", 5),
        ("1.8 TB/s", 2),
        ("130 TB/s", 3),
        ("400 Gb/s", 3),
        ("0.05 s", 1),
        ("19.6TB/s", 3),
        ("8", 1),
        ("eight", None),
        ("Instinct MI455X", None),  # a digit inside a name is no figure
        (None, None),
    ],
)
def test_significant_digits_of_a_stated_figure(text, digits):
    assert significant_digits(text) == digits


def test_a_stated_figure_is_printed_with_the_digits_the_document_states():
    # AMD's MI300X page: 1,307.4 TFLOPS dense BF16, never "1,310 TFLOP/s".
    row = {"value_number": 1307.4, "unit": "TFLOP/s", "direction": None, "digits": 5}
    assert format_field(row) == "1,307.4 TFLOP/s"
    assert format_quantity(1307.4, "TFLOP/s") == "1,310 TFLOP/s"  # the three-digit default, for computed figures
    assert format_field({**row, "value_number": 2614.9}) == "2,614.9 TFLOP/s"
    assert format_field({"value_number": 1800.0, "unit": "GB/s", "direction": "bidirectional", "digits": 2}) == (
        "1.8 TB/s bidirectional"
    )


def test_a_derived_figure_is_printed_to_the_precision_of_its_inputs():
    # 130 TB/s ÷ 72: three digits from "130", none from the exact count.
    assert format_field({"value_number": 130_000 / 72, "unit": "GB/s", "direction": "bidirectional", "digits": 3}) == (
        "1.81 TB/s bidirectional"
    )
    assert format_field({"value_number": 13.4e3 / 72, "unit": "GB", "direction": None, "digits": 3}) == "186 GB"


def test_a_field_without_a_number_prints_its_text_or_a_dash():
    assert format_field({"value_number": None, "value_text": "NVLink 5"}) == "NVLink 5"
    assert format_field({"value_number": None, "value_text": None}) == "—"
    assert format_field({"value_number": 8.0, "unit": "count", "digits": None}) == "8"


def test_a_diff_starts_at_the_digits_the_documents_state():
    assert format_distinct(1307.4, 1307.4, "TFLOP/s", digits=5) == ("1,307.4 TFLOP/s",) * 2
    assert format_distinct(1307.4, 2614.9, "TFLOP/s", digits=5) == ("1,307.4 TFLOP/s", "2,614.9 TFLOP/s")


@pytest.mark.parametrize(
    ("fraction", "digits", "signed", "expected"),
    [
        (0.4567, 2, False, "46%"),
        (0.004, 2, False, "0.4%"),  # `:.0%` prints '0%' and hides the share
        (1.5e-05, 2, False, "0.0015%"),
        (0.15, 2, False, "15%"),
        (1.234, 2, False, "123%"),  # whole from 100% up, never rounded to '120%'
        (1e6, 2, False, "100,000,000%"),  # separators, never '1e+08%'
        (0.123456, 3, True, "+12.3%"),
        (-0.04, 3, True, "-4%"),
        (0, 3, True, "0%"),
        (None, 2, False, "—"),
        (float("nan"), 2, False, "—"),
    ],
)
def test_percent(fraction, digits: int, signed: bool, expected: str) -> None:
    assert format_percent(fraction, digits, signed) == expected
