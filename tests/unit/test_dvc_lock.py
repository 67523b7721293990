"""dvc.lock holds no stage that dvc.yaml no longer has.

DVC never removes a stage's entry from dvc.lock when the stage leaves dvc.yaml (`dvc repro` only adds and
updates), and after every stage it runs it re-reads the whole lock and writes it back: a stale entry costs CPU on
every stage of every `dvc repro` and is never used. This test names the stale entries, so they are deleted when
the stage goes (a workload removed from params.yaml takes its `traffic-workload@<id>` stage with it).
"""

from __future__ import annotations

import yaml
from conftest import ROOT


def stage_names(dvc_yaml: dict, params: dict | None = None) -> tuple[set[str], set[str]]:
    """(names as `dvc repro` runs them, prefixes of `matrix` stages whose item names are not expanded here):
    a plain stage is its name, a `foreach` item `name@key` (list items are their own key; `foreach: ${name}`
    iterates params.yaml's `name`)."""
    names: set[str] = set()
    prefixes: set[str] = set()
    for name, spec in (dvc_yaml.get("stages") or {}).items():
        if "foreach" in spec:
            items = spec["foreach"]
            if isinstance(items, str):
                items = (params or {})[items.removeprefix("${").removesuffix("}")]
            keys = items.keys() if isinstance(items, dict) else items
            names.update(f"{name}@{key}" for key in keys)
        elif "matrix" in spec:
            prefixes.add(f"{name}@")
        else:
            names.add(name)
    return names, prefixes


def stale_lock_entries(dvc_yaml: dict, dvc_lock: dict, params: dict | None = None) -> list[str]:
    """The stages dvc.lock records that dvc.yaml does not define."""
    names, prefixes = stage_names(dvc_yaml, params)
    locked = (dvc_lock or {}).get("stages") or {}
    return sorted(k for k in locked if k not in names and not any(k.startswith(p) for p in prefixes))


def test_stale_entries_are_found() -> None:
    dvc_yaml = {
        "stages": {
            "a": {"cmd": "x"},
            "w": {"foreach": ["one", "two"], "do": {"cmd": "x ${item}"}},
            "s": {"foreach": {"k": {"with": "v"}}, "do": {"cmd": "x ${key}"}},
            "m": {"matrix": {"n": [1, 2]}, "cmd": "x ${item.n}"},
            "p": {"foreach": "${workloads}", "do": {"cmd": "x ${key}"}},
        }
    }
    lock = {"stages": {"a": {}, "w@one": {}, "w@three": {}, "s@k": {}, "m@1": {}, "gone": {}, "w": {}, "p@b": {}}}
    assert stale_lock_entries(dvc_yaml, lock, {"workloads": {"a": {}}}) == ["gone", "p@b", "w", "w@three"]
    assert stale_lock_entries(dvc_yaml, {}, {"workloads": {}}) == []


def test_dvc_lock_has_no_stage_dvc_yaml_lost() -> None:
    dvc_yaml = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    dvc_lock = yaml.safe_load((ROOT / "dvc.lock").read_text())
    stale = stale_lock_entries(dvc_yaml, dvc_lock, yaml.safe_load((ROOT / "params.yaml").read_text()))
    assert not stale, (
        f"dvc.lock: stages {', '.join(stale)} are not in dvc.yaml; DVC never drops them and rewrites them after "
        "every stage it runs: delete their entries from dvc.lock"
    )
