"""Report pages print numbers through the one formatter, with unit and direction (no bare '900')."""

from __future__ import annotations

from fabricref.report.stage import _value


def test_report_values_carry_unit_and_direction():
    assert _value({"value_number": 900.0, "value_text": None, "unit": "GB/s", "direction": "bidirectional"}) == (
        "900 GB/s bidirectional"
    )
    assert _value({"value_number": 400.0, "value_text": None, "unit": "Gb/s", "direction": "per_direction"}) == (
        "400 Gb/s per direction"
    )
    assert _value({"value_number": 8.0, "value_text": None, "unit": "count", "direction": None}) == "8"
    assert _value({"value_number": None, "value_text": "NVLink 4", "unit": None, "direction": None}) == "NVLink 4"
