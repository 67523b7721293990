"""What the explorer and the static report both show, in one place: how a topology is drawn (`drawing`, `layout`),
a workload's load per drawn link (`loads`), and the Jinja templates and filters both render with (`templates`),
which print every number through the one formatter (core/format.py).

A library floor above `estimate` and below the stages: the report stage and the explorer import it, it imports
neither (tests/unit/test_layout.py).
"""
