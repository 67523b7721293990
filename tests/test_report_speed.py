"""What makes a cold report fast changes no byte: drawings made in a forked helper process come back complete and
in order (and a helper's failure is drawn again here), and the shortcuts inside a drawing (text measured once per
process, hidden axes skipping their tick layout, boxes added without data limits) give exactly the SVG matplotlib
gives without them."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import matplotlib
import pytest
from fabricref.report import STYLE, drawings, heat, workers
from fabricref.report.cells import Cell

ROOT = Path(__file__).resolve().parents[1]

# Runs in a fresh interpreter: the pytest process (an xdist worker) runs threads, and the report never forks then.
QUEUE_SCRIPT = textwrap.dedent(
    """
    import os, sys, time
    from fabricref.report import workers

    parent = os.getpid()

    def draw(name):
        def made(i):
            time.sleep(0.02)  # long enough that both processes take some of the queue
            if name == "fails-in-helper" and os.getpid() != parent:
                raise RuntimeError("only the helper fails")
            if name == "fails-here":
                if os.getpid() == parent:
                    raise RuntimeError("this process fails")
                time.sleep(1)  # the helper's work, not waited for
            return f"{i}:{'parent' if os.getpid() == parent else 'helper'}".encode()
        return made

    name = sys.argv[1]
    batch = workers.Batch([(name, (i,)) for i in range(12)], draw, helper=True)
    began = time.monotonic()
    try:
        print(" ".join(svg.decode() for svg in batch.results()))
    except RuntimeError as exc:
        waited = "waited" if time.monotonic() - began > 5 else "at once"
        try:
            os.waitpid(-1, os.WNOHANG)
            print(f"{exc} {waited}; a child is left")
        except ChildProcessError:
            print(f"{exc} {waited}; no child left")
    """
)


def _run(name: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-c", QUEUE_SCRIPT, name], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


def _queue(name: str) -> list[tuple[int, str]]:
    return [(int(i), who) for i, who in (item.split(":") for item in _run(name).split())]


@pytest.mark.skipif(not workers.helpers(), reason="one CPU: nothing is forked")
def test_a_helper_process_draws_part_of_the_queue_and_every_result_comes_back_in_order():
    results = _queue("fine")
    assert [i for i, _ in results] == list(range(12))
    assert {who for _, who in results} == {"parent", "helper"}


@pytest.mark.skipif(not workers.helpers(), reason="one CPU: nothing is forked")
def test_what_the_helper_fails_to_draw_is_drawn_here():
    results = _queue("fails-in-helper")
    assert results == [(i, "parent") for i in range(12)]


@pytest.mark.skipif(not workers.helpers(), reason="one CPU: nothing is forked")
def test_a_failure_here_is_raised_at_once_and_the_helper_is_ended():
    assert _run("fails-here") == "this process fails at once; no child left"


def test_with_another_thread_running_nothing_is_forked_and_errors_surface_here():
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        here = os.getpid()
        batch = workers.Batch(
            [("a", (1,)), ("b", (2,))], lambda name: lambda n: f"{name}{n}{os.getpid()}".encode(), True
        )
        assert batch.results() == [f"a1{here}".encode(), f"b2{here}".encode()]

        def broken(name: str):
            def draw(n: int) -> bytes:
                raise ValueError(f"cannot draw {name}")

            return draw

        with pytest.raises(ValueError, match="cannot draw a"):
            workers.Batch([("a", (1,)), ("b", (2,))], broken, True).results()
    finally:
        stop.set()
        other.join()


def _part(node: str, kind: str, within: str, role: str | None = None) -> dict[str, object]:
    return {"node": node, "kind": kind, "within": within, "label": node, "role": role}


NODES = [{"node": f"t{t}", "kind": "tray", "within": None, "label": f"tray {t}", "role": None} for t in (1, 2)]
NODES += [_part(f"gpu{t}{i}", "accelerator", f"t{t}") for t in (1, 2) for i in range(4)]
NODES += [_part(f"nic{t}", "nic", f"t{t}", "scale_out") for t in (1, 2)] + [_part("sw", "scale_up_switch", "t1")]
EDGES = [{"source": f"gpu{t}{i}", "target": "sw", "network": "scale_up"} for t in (1, 2) for i in range(4)]
EDGES += [{"source": f"gpu{t}0", "target": f"nic{t}", "network": "host"} for t in (1, 2)]
CELLS = [Cell("NIC–leaf", 0, 0.4, 16), Cell("leaf–spine", 1, 0.9, 4), Cell("spine–core", None, 1.3, 2)]
SUMMARY = {
    "nodes_by_kind": {"core": 16, "spine": 80, "leaf": 80, "frontend_switch": 4},
    "oversubscription": {"leaf": 1, "spine": 2},
    "scale_up_domains": 320,
    "scale_up_domain_size": 8,
    "accelerators": 2560,
    "bisection_bandwidth_gbps": 512000,
}
CALLS = [
    ("reference parts", drawings.draw_reference, ("r", NODES, EDGES)),
    ("link load", heat.draw_link_load, ("l", NODES, EDGES, {("gpu10", "sw"): 0.5, ("gpu20", "nic2"): 1.2})),
    ("tier-pod load", heat.draw_tier_pod_load, ("c", CELLS, 3)),
    ("cluster structure", drawings.draw_cluster, ("c", SUMMARY, 10, 8)),
    ("bar chart", drawings.bar_chart, ("b", ["x", "y"], {"overhead": [1.0, 2.0], "bandwidth": [0.5, 0.25]}, "s")),
]


@pytest.mark.parametrize(("what", "draw", "args"), CALLS, ids=[c[0] for c in CALLS])
def test_the_shortcuts_inside_a_drawing_give_matplotlibs_own_bytes(monkeypatch, what, draw, args):
    fast = draw(*args)
    assert draw(*args) == fast  # text metrics now come from the process-wide table
    # Without the shortcuts: matplotlib's per-renderer text metrics, and axes merely switched off.
    monkeypatch.setattr(drawings, "_axis_off", lambda ax: ax.axis("off"))
    monkeypatch.setattr(heat, "_axis_off", lambda ax: ax.axis("off"))
    monkeypatch.setattr(drawings, "_add_box", lambda ax, box: ax.add_patch(box))
    with matplotlib.rc_context(STYLE):
        plain = draw.__wrapped__(*args)
    assert plain == fast, what


def test_text_is_measured_once_per_process_only_under_the_same_text_settings():
    heat.draw_tier_pod_load("c", CELLS, 3)
    tables = len(drawings._TEXT_METRICS)
    with matplotlib.rc_context({"text.antialiased": False}):  # another text setting: another table
        heat.draw_tier_pod_load("c", CELLS, 3)
    assert len(drawings._TEXT_METRICS) == tables + 1
    assert matplotlib.text._get_text_metrics_with_cache.__module__ == "matplotlib.text"  # restored afterwards


def test_colours_in_one_lookup_are_each_utilisations_own_colour():
    # Edges of the scale and of its 256 bins, beyond the top (oversubscribed), and uneven values.
    values = [0.0, 1e-9, 0.5, 1 / 3, 0.999999, 1.0, 1.5, 2.0, 255 / 256, 1 / 256, 0.123456789, 0.87654321]
    for vmax in (1.0, 1.5, 2.0):
        assert heat.colours(values, vmax) == [heat.colour(u, vmax) for u in values]
    assert heat.colours([], 1.0) == []
