"""Time the everyday loop: cold `dvc repro` stage by stage, then the incremental cases, printed as a table.

Run from the repository root with the venv's bin on PATH (dvc and fabricref must resolve):
    PATH=$PWD/.venv/bin:$PATH python benchmarks/pipeline.py [--dvc-alone] [--tests [--suite] [--ci]] [--profile DIR]
                                                             [--keep] [--readme]

Everything runs in a temporary copy of the checkout (tracked files plus new unignored ones, committed to a
fresh git repository) so the real one is never touched. Each measurement runs its command in a fresh wrapper
process, so the CPU seconds (user + system of every descendant) and the peak resident memory (largest single
descendant) are that command's own. On a shared machine wall time is inflated by the load; CPU seconds are the
steadier number, and the load average is printed beside them.

Cases (budgets for a 2-core machine):
- cold: one `dvc repro` on the copy with no outputs, the checkout's dvc.lock and every cache empty: DVC's cache
  (run cache included) and DVC's site cache (kept beside the copy, not under /var/tmp/dvc) (≤ 30 s). Afterwards
  every output hash in `dvc.lock` must equal the checkout's (nothing dropped, outputs deterministic).
- cold again: everything back to that state, a second cold `dvc repro`; its dvc.lock must be byte-identical to the
  first's (a second sample of the cold time, too).
- DVC alone (--dvc-alone): a cold `dvc repro` of another copy whose stage commands only copy the cold run's
  outputs into place (a shell `cp`): what DVC itself costs (hashing, caching, run cache, dvc.lock rewritten after
  every stage), in total and per stage.
- stage NAME: each stage's command alone, one row per stage as DVC resolves dvc.yaml (`foreach` / `matrix` items
  included); it rewrites the same bytes. Then "cold minus stages summed": DVC's own share of the cold run.
- workload: one knob of one workload changes in params.yaml; `dvc repro` (≤ 10 s): that workload's stage, the
  combine step and the workload part of the report. Three new values in turn (none in the run cache), the median
  in the table and each one above it: one sample swings by a third on a shared machine.
- source: a new revision of one source that moves no figure (its title reworded: what most refreshes of a vendor
  page bring) is pinned; `dvc repro`. retrieve, extract and compile rerun; compile's fact tables come out
  byte-identical, so topology, traffic and the workload pages are skipped; the citation tables move, so the
  reference pages and the views file are rebuilt.
- source figure: then one figure in that source changes (900 → 950 GB/s NVLink on HGX H100) and is pinned; no
  budget: the H100 systems and both H100 clusters change, and with them most of the traffic work (everything
  downstream of compile reruns).
- fast tests (--tests): the README's pytest with `-m "not slow"` (≤ 90 s), in the checkout; with --suite the whole
  suite too; `.ci/run` (--tests --ci): on a fresh clone of HEAD (≤ 600 s; the browser install is part of it only
  on a machine without chromium, and the row says which).
--profile DIR also writes DIR/STAGE.prof (cProfile of each stage command, forced) for `python -m pstats`.
--readme also writes the printed figures into benchmarks/README.md, as the block of its section "The everyday loop"
(benchmarks/readme.py: every other section, the explorer's included, is left as it is).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKLOAD = "llama8b-fsdp-dp64"  # its knobs live in params.yaml under workloads.<id>
# Three values of one knob in turn, none of them in the run cache (the shipped value is the last one's revert).
WORKLOAD_EDITS = [
    ("seq_len: 8192", "seq_len: 4096"),
    ("seq_len: 4096", "seq_len: 6144"),
    ("seq_len: 6144", "seq_len: 2048"),
]
SOURCE = "nvidia-hgx-h100-blog"
SOURCE_REVISION_EDIT = (b"(NVIDIA Technical Blog)</title>", b"(NVIDIA Developer Blog)</title>")
SOURCE_EDIT = (b"900 gigabytes", b"950 gigabytes")
BUDGETS = {
    "cold": 30.0,
    "cold again": 30.0,
    "workload": 10.0,
    "fast tests": 90.0,
    ".ci/run": 600.0,
}


@dataclass
class Measure:
    """One command's cost: wall seconds, CPU seconds of all its descendants, peak RSS of the largest one."""

    name: str
    wall: float
    cpu: float
    peak_mb: float
    ran: str = ""


def _measure_child(cmd: list[str]) -> int:
    """Wrapper mode: run CMD, then print its wall, CPU and peak RSS as JSON on the last line of stderr."""
    start = time.perf_counter()
    done = subprocess.run(cmd, check=False)
    wall = time.perf_counter() - start
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    stats = {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "peak_mb": ru.ru_maxrss / 1024, "code": done.returncode}
    print("BENCH " + json.dumps(stats), file=sys.stderr)
    return done.returncode


def measure(name: str, cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> Measure:
    """Run CMD in CWD through a fresh wrapper process; fail loudly if it fails."""
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--measure", "--", *cmd],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    lines = [line for line in done.stderr.splitlines() if line.startswith("BENCH ")]
    if done.returncode != 0 or not lines:
        sys.exit(f"{name}: {' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    stats = json.loads(lines[-1][len("BENCH ") :])
    ran = ", ".join(re.findall(r"Running stage '([^']+)'", done.stdout))
    return Measure(name, stats["wall"], stats["cpu"], stats["peak_mb"], ran)


def copy_checkout(dest: Path) -> Path:
    """The checkout as a developer has it now (tracked + new unignored files), committed to a fresh repo."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True, capture_output=True
    ).stdout.decode()
    for rel in sorted(p for p in listed.split("\0") if p and (ROOT / p).is_file()):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dest / rel)
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b"}
    env["GIT_COMMITTER_EMAIL"] = "b@b"
    for cmd in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"], ["git", "commit", "-q", "-m", "copy"]):
        subprocess.run(cmd, cwd=dest, check=True, env=env)
    return dest


def stages(root: Path) -> dict[str, tuple[str, list[str]]]:
    """Stage name → (command, output paths) as DVC resolves dvc.yaml (`foreach` / `matrix` items expanded and
    named as `dvc repro` names them), in dvc.yaml order; read through DVC itself so no stage name is hard-coded
    here and any templating DVC supports is followed."""
    from dvc.repo import Repo

    out: dict[str, tuple[str, list[str]]] = {}
    here = Path.cwd()
    os.chdir(root)  # DVC names a stage relative to the working directory (`name`, `sub/dvc.yaml:name`)
    try:
        with Repo(".") as repo:
            for stage in repo.index.stages:
                if stage.cmd:
                    cmd = stage.cmd if isinstance(stage.cmd, str) else " && ".join(stage.cmd)
                    out[stage.addressing] = (cmd, [o.def_path for o in stage.outs])
    finally:
        os.chdir(here)
    return out


def argv_of(cmd: str) -> list[str]:
    """A stage command as this interpreter runs it (`python -m ...` → sys.executable -m ...)."""
    argv = cmd.split()
    if argv[0] == "python":
        return [sys.executable, *argv[1:]]
    if argv[0] == "fabricref":  # the console script is `python -m fabricref.cli`
        return [sys.executable, "-m", "fabricref.cli", *argv[1:]]
    return argv


def lock_differences(built: Path, shipped: Path) -> list[str]:
    """Stages whose outputs (paths and hashes in dvc.lock) differ; deps hashes move with every code change."""
    from ruamel.yaml import YAML

    def outs(path: Path) -> dict[str, list[tuple[str, str]]]:
        stages = YAML(typ="safe").load(path.read_text())["stages"]
        return {k: sorted((o["path"], o.get("md5", "")) for o in v.get("outs", [])) for k, v in stages.items()}

    a, b = outs(built), outs(shipped)
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))


def edit(path: Path, old: bytes, new: bytes) -> None:
    data = path.read_bytes()
    if old not in data:
        sys.exit(f"{path}: expected to find {old!r} to change it")
    path.write_bytes(data.replace(old, new, 1))


def edit_params(root: Path, workload: str, old: str, new: str) -> None:
    """Change one knob of one workload in params.yaml (inside that workload's block only)."""
    path = root / "params.yaml"
    text = path.read_text()
    start = text.index(f"\n  {workload}:\n") + 1
    nxt = re.search(r"^  \S", text[start + 1 :], re.M)
    end = start + 1 + nxt.start() if nxt else len(text)
    if old not in text[start:end]:
        sys.exit(f"params.yaml: workloads.{workload} has no {old!r} to change")
    path.write_text(text[:start] + text[start:end].replace(old, new, 1) + text[end:])


def site_cache(root: Path) -> Path:
    """DVC's per-repository site cache (its hash state and index), kept beside the copy: emptied for a cold run
    and removed with the copy instead of piling up under /var/tmp/dvc."""
    return root.parent / f"{root.name}-dvc-site-cache"


def use_own_site_cache(root: Path) -> None:
    (root / ".dvc" / "config.local").write_text(f"[core]\n    site_cache_dir = {site_cache(root)}\n")


def make_cold(root: Path) -> None:
    """Back to the checkout as committed: no outputs, dvc.lock as shipped, every cache empty (DVC's cache, run cache
    and site cache); refuse to measure a "cold" run that is not."""
    subprocess.run(["git", "checkout", "-q", "--", "."], cwd=root, check=True)
    subprocess.run(["git", "clean", "-qfdx", "-e", ".dvc/config.local"], cwd=root, check=True)
    shutil.rmtree(site_cache(root), ignore_errors=True)
    left = [p for p in (root / ".dvc" / "cache", root / ".dvc" / "tmp") if p.exists()]
    if left or site_cache(root).exists():
        sys.exit(f"not a cold start, still present: {', '.join(map(str, left))}")


def dvc_alone(work: Path, built: Path, listed: dict[str, tuple[str, list[str]]]) -> Measure:
    """DVC's own cost on a cold run: a fresh copy whose stage commands only copy their outputs from BUILT (the
    cold run's), so `dvc repro` does all it does for the real pipeline (hashing, caching, run cache, dvc.lock
    rewritten after each stage) except the stages' work. The copy's dvc.lock names the same commands, so DVC skips
    what it skips on the real cold run; its outputs must come out as the real run's."""
    root = copy_checkout(work / "alone")
    use_own_site_cache(root)
    saved = work / "alone-outputs"
    cases = []
    for cmd, outs in listed.values():
        copies = []
        for out in outs:
            (saved / out).parent.mkdir(parents=True, exist_ok=True)
            copy = shutil.copytree if (built / out).is_dir() else shutil.copy2
            copy(built / out, saved / out)
            parent = shlex.quote(str(Path(out).parent))
            copies.append(f"mkdir -p {parent} && cp -a {shlex.quote(str(saved / out))} {shlex.quote(out)}")
        cases.append(f"  {shlex.quote(' '.join(cmd.split()))}) {' && '.join(copies) or 'true'} ;;")
    script = work / "replay"  # a shell `case` on the stage's command: cp costs next to nothing
    cases.append('  *) echo "replay: no stage runs $*" >&2; exit 1 ;;')
    script.write_text('#!/bin/sh\nset -e\ncase "$*" in\n' + "\n".join(cases) + "\nesac\n")
    script.chmod(0o755)
    prefix = f"{os.path.relpath(script, root)} "
    for name in ("dvc.yaml", "dvc.lock"):
        text = (root / name).read_text()
        (root / name).write_text(re.sub(r"^(\s+cmd: )", lambda m: m.group(1) + prefix, text, flags=re.M))
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b"}
    env["GIT_COMMITTER_EMAIL"] = "b@b"
    subprocess.run(["git", "commit", "-qam", "replay"], cwd=root, check=True, env=env)
    row = measure("DVC alone (commands only copy outputs)", ["dvc", "repro"], root)
    moved = lock_differences(root / "dvc.lock", built / "dvc.lock")
    if moved:
        sys.exit(f"DVC alone: the replayed outputs differ from the cold run's: {', '.join(moved)}")
    stages_run = len(row.ran.split(", ")) if row.ran else 0
    row.ran = f"{stages_run} stages, {row.cpu / max(stages_run, 1):.2f} CPU s per stage"
    return row


def stages_run(ran: str, listed: dict[str, tuple[str, list[str]]]) -> str:
    """The stages DVC ran, shortened to "every stage but ..." when that is shorter."""
    names = ran.split(", ") if ran else []
    if not names or any(n not in listed for n in names):
        return ran
    rest = [n for n in listed if n not in names]
    if not rest:
        return "every stage"
    return ("every stage but " + ", ".join(rest)) if len(rest) < len(names) else ran


def run_all(work: Path, profile: Path | None, alone: bool) -> tuple[list[Measure], list[str]]:
    """The cases' rows, and the checks on the cold runs' dvc.lock (lines printed above the table)."""
    from ruamel.yaml import YAML

    root = copy_checkout(work / "repo")
    use_own_site_cache(root)
    make_cold(root)
    rows: list[Measure] = [measure("cold", ["dvc", "repro"], root)]
    moved = lock_differences(root / "dvc.lock", ROOT / "dvc.lock")
    first_lock = (root / "dvc.lock").read_bytes()
    locked = YAML(typ="safe").load(first_lock)["stages"]
    lock_size = f"dvc.lock after the cold run: {len(first_lock.splitlines())} lines, {len(locked)} stages"
    rows.append(measure("no-op repro", ["dvc", "repro"], root))
    make_cold(root)
    rows.append(measure("cold again", ["dvc", "repro"], root))
    same_lock = (root / "dvc.lock").read_bytes() == first_lock
    listed = stages(root)
    if alone:
        rows.append(dvc_alone(work, root, listed))
    # Each command alone, as the cold run ran it.
    per_stage = [measure(f"stage {name}", argv_of(cmd), root) for name, (cmd, _) in listed.items()]
    rows += per_stage
    rows.append(
        Measure(
            "stages summed",
            sum(r.wall for r in per_stage),
            sum(r.cpu for r in per_stage),
            max(r.peak_mb for r in per_stage),
            "each command alone, no DVC",
        )
    )
    cold = rows[0]
    rows.append(
        Measure("cold minus stages summed", cold.wall - rows[-1].wall, cold.cpu - rows[-1].cpu, 0, "DVC's own cost")
    )
    # The commands rewrote the same bytes with new mtimes: let DVC rehash them now, not inside the cases below.
    subprocess.run(["dvc", "status", "-q"], cwd=root, check=False, capture_output=True)
    if profile is not None:
        profile.mkdir(parents=True, exist_ok=True)
        for name, (cmd, _) in listed.items():
            argv = argv_of(cmd)
            if argv[1:2] != ["-m"]:
                continue
            out = str((profile / f"{name}.prof").resolve())
            rows.append(measure(f"profile {name}", [sys.executable, "-m", "cProfile", "-o", out, *argv[1:]], root))
    knobs = []
    for edit_ in WORKLOAD_EDITS:
        edit_params(root, WORKLOAD, *edit_)
        knobs.append(measure("workload", ["dvc", "repro"], root))
    rows.append(sorted(knobs, key=lambda r: r.wall)[len(knobs) // 2])
    knob_walls = " / ".join(f"{r.wall:.1f}" for r in knobs)
    subprocess.run(["git", "checkout", "--", "params.yaml"], cwd=root, check=True)
    rows.append(measure("workload reverted", ["dvc", "repro"], root))
    transcription = root / "sources" / "transcriptions" / f"{SOURCE}.html"
    edit(transcription, *SOURCE_REVISION_EDIT)
    subprocess.run(["fabricref", "pin", SOURCE], cwd=root, check=True, capture_output=True)
    rows.append(measure("source", ["dvc", "repro"], root))
    edit(transcription, *SOURCE_EDIT)
    subprocess.run(["fabricref", "pin", SOURCE], cwd=root, check=True, capture_output=True)
    rows.append(measure("source figure", ["dvc", "repro"], root))
    for row in rows:
        row.ran = stages_run(row.ran, listed)
    same = "yes" if not moved else "NO, stages differing: " + ", ".join(moved)
    checks = [
        f"outputs of the cold run (dvc.lock outs) identical to the checkout's: {same}",
        f"dvc.lock of a second cold run byte-identical to the first's: {'yes' if same_lock else 'NO'}",
        lock_size + f" (dvc.yaml: {len(listed)}; DVC re-reads and rewrites the whole lock after every stage)",
        f"workload: {len(knobs)} values of workloads.{WORKLOAD}.seq_len in turn, wall {knob_walls} s (median below)",
    ]
    stale = sorted(set(locked) - set(listed))  # DVC never drops a removed stage's entry
    if stale:
        checks.append(f"dvc.lock entries of stages dvc.yaml no longer has (delete them): {', '.join(stale)}")
    return rows, checks


def run_tests(work: Path, suite: bool, ci: bool) -> list[Measure]:
    """The test budgets: the fast tier as the README runs it (in the checkout itself: the tests never write to it),
    with --suite the whole suite too, then with --ci `.ci/run` on a fresh clone of the checkout's HEAD, as CI runs
    it (its own venv and installs; the browser install is skipped when chromium is already on the machine, and the
    row says so)."""
    pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    rows = [measure("fast tests", [*pytest, "-m", "not slow"], ROOT)]
    rows[0].ran = "-m 'not slow', xdist"
    if suite:
        rows.append(measure("whole suite", pytest, ROOT))
        rows[-1].ran = "the README's pytest, xdist"
    if ci:
        clone = work / "ci"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        row = measure(".ci/run", ["bash", ".ci/run"], clone, env={**os.environ, "CI": "true"})
        browser = "chromium already installed" if shutil.which("chromium") else "chromium installed by it"
        row.ran = f"fresh clone of HEAD, {browser}"
        rows.append(row)
    return rows


def table(rows: list[Measure]) -> str:
    head = f"{'case':<50} {'wall s':>8} {'CPU s':>8} {'peak MB':>8} {'budget':>8}  stages run"
    lines = [head, "-" * len(head)]
    for r in rows:
        budget = BUDGETS.get(r.name)
        mark = f"{budget:>6.0f} {'ok' if r.wall <= budget else '!'}" if budget else ""
        lines.append(f"{r.name:<50} {r.wall:>8.1f} {r.cpu:>8.1f} {r.peak_mb:>8.0f} {mark:>8}  {r.ran}")
    return "\n".join(lines)


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--measure":
        return _measure_child(sys.argv[3:] if sys.argv[2] == "--" else sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", type=Path, help="also write cProfile output per stage into this directory")
    parser.add_argument("--keep", action="store_true", help="keep the temporary copy and print its path")
    parser.add_argument(
        "--dvc-alone",
        action="store_true",
        help="also time a cold `dvc repro` whose stage commands only copy the cold run's outputs (DVC's own cost)",
    )
    parser.add_argument("--tests", action="store_true", help="also time the fast test tier")
    parser.add_argument("--suite", action="store_true", help="with --tests: also the whole suite")
    parser.add_argument("--ci", action="store_true", help="with --tests: also `.ci/run` on a fresh clone of HEAD")
    parser.add_argument(
        "--readme", action="store_true", help="also write the figures into benchmarks/README.md (its section alone)"
    )
    args = parser.parse_args()
    # Python as a user's machine runs it: bytecode written at first import. With PYTHONDONTWRITEBYTECODE set (as
    # in some CI shells) no stage would ever find its modules compiled and every one would recompile them. The copy
    # starts with no __pycache__, so the cold run still pays the compiling, once.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    if shutil.which("dvc") is None or shutil.which("fabricref") is None:
        print("dvc and fabricref must be on PATH (PATH=$PWD/.venv/bin:$PATH)", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="fabricref-bench-"))
    try:
        load = os.getloadavg()
        rows, checks = run_all(work, args.profile, args.dvc_alone)
        if args.tests:
            rows += run_tests(work, args.suite, args.ci)
        cpus = f"{os.cpu_count()} CPUs, load average before {load[0]:.1f}, after {os.getloadavg()[0]:.1f}"
        figures = "\n".join([*checks, cpus, table(rows)])
        print(figures)
        if args.readme:
            from readme import write_figures  # benchmarks/readme.py, beside this script

            write_figures("The everyday loop", figures)
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
