"""The explorer's what-if sentences print their figures through the one formatter (core/format.py), as every
other view does: expectations written by hand."""

from __future__ import annotations

import networkx as nx
import pytest
from fabricref.explore.explorer import _uplink_note


def leaf_with(nics: int, uplinks: int, gbps: float = 400.0) -> tuple[nx.Graph, dict[str, str]]:
    """One leaf switch with `nics` NICs below it and `uplinks` spine trunks above it, each of `gbps` per direction."""
    g = nx.Graph()
    kind = {"leaf0": "leaf"}
    for i in range(nics):
        g.add_edge(f"nic{i}", "leaf0", bandwidth_gbps=gbps)
        kind[f"nic{i}"] = "nic"
    for i in range(uplinks):
        g.add_edge("leaf0", f"spine{i}", bandwidth_gbps=gbps)
        kind[f"spine{i}"] = "spine"
    return g, kind


@pytest.mark.parametrize(
    ("nics", "uplinks", "before", "after"),
    [
        (2048, 2, "1,024:1", "2,048:1"),  # never '1.02e+03:1'
        (7, 3, "2.33:1", "3.5:1"),
        (8, 8, "1:1", "1.14:1"),
    ],
)
def test_a_failed_uplink_states_the_oversubscription_through_the_one_formatter(nics, uplinks, before, after) -> None:
    g, kind = leaf_with(nics, uplinks)
    (note,) = _uplink_note(g, kind, "leaf0", "spine0")
    assert f"oversubscription {before} becomes {after} for traffic leaving the leaf" in note, note
    assert "falls from 800 Gb/s to 400 Gb/s" in note or uplinks != 2


def test_a_leaf_losing_its_last_uplink_says_so_and_a_nic_link_says_nothing() -> None:
    g, kind = leaf_with(4, 1)
    assert _uplink_note(g, kind, "spine0", "leaf0") == ["leaf0 loses its last uplink"]
    assert _uplink_note(g, kind, "nic0", "leaf0") == []
