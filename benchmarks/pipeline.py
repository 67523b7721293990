"""Time the everyday loop: cold `dvc repro` stage by stage, then the incremental cases, printed as a table.

Run from the repository root with the venv's bin on PATH (dvc and fabricref must resolve):
    PATH=$PWD/.venv/bin:$PATH python benchmarks/pipeline.py [--profile DIR] [--keep]

Everything runs in a temporary copy of the checkout (tracked files plus new unignored ones, committed to a
fresh git repository) so the real one is never touched and the DVC cache starts empty. Each measurement runs
its command in a fresh wrapper process, so the CPU seconds (user + system of every descendant) and the peak
resident memory (largest single descendant) are that command's own. On a shared machine wall time is
inflated by the load; CPU seconds are the steadier number, and the load average is printed beside them.

Cases (budgets from issue 16):
- cold: one `dvc repro` on the fresh copy (≤ 15 s); afterwards every output hash in `dvc.lock` must equal the
  checkout's (nothing dropped, outputs deterministic). Then each stage's command alone (`stage NAME` rows, one per
  stage as `dvc repro` runs them, `foreach` items included), which rewrites the same bytes: where the time goes.
- workload: one knob of one workload changes in params.yaml; `dvc repro` (≤ 5 s).
- source: a new revision of one source that moves no figure (its title reworded: what most refreshes of a vendor
  page bring) is pinned; `dvc repro` (≤ 10 s). retrieve, extract and compile rerun; compile's fact tables come
  out byte-identical, so topology, traffic and the workload pages are skipped; the citation tables move, so the
  reference pages and the views file are rebuilt.
- source figure: then one figure in that source changes (900 → 950 GB/s NVLink on HGX H100) and is pinned; no
  budget: the H100 systems and both H100 clusters change, and with them most of the traffic work (everything
  downstream of compile reruns).
--profile DIR also writes DIR/STAGE.prof (cProfile of each stage command, forced) for `python -m pstats`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKLOAD = "llama8b-fsdp-dp64"  # its knobs live in params.yaml under workloads.<id>
WORKLOAD_EDIT = ("seq_len: 8192", "seq_len: 4096")
SOURCE = "nvidia-hgx-h100-blog"
SOURCE_REVISION_EDIT = (b"(NVIDIA Technical Blog)</title>", b"(NVIDIA Developer Blog)</title>")
SOURCE_EDIT = (b"900 gigabytes", b"950 gigabytes")
BUDGETS = {"cold": 15.0, "workload": 5.0, "source": 10.0}


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


def measure(name: str, cmd: list[str], cwd: Path) -> Measure:
    """Run CMD in CWD through a fresh wrapper process; fail loudly if it fails."""
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--measure", "--", *cmd],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
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


def stages(root: Path) -> dict[str, str]:
    """Stage name → command, in dvc.yaml order (the order `dvc repro` runs them here), `foreach` stages expanded
    to `name@key` as DVC names them (only `${item}`, `${key}` and `${item.<field>}` are used in dvc.yaml)."""
    from ruamel.yaml import YAML

    out: dict[str, str] = {}
    for name, spec in YAML(typ="safe").load((root / "dvc.yaml").read_text())["stages"].items():
        if "foreach" not in spec:
            out[name] = spec["cmd"]
            continue
        items = spec["foreach"]
        for key, item in items.items() if isinstance(items, dict) else ((str(i), i) for i in items):
            cmd = spec["do"]["cmd"].replace("${key}", str(key))
            if isinstance(item, dict):
                for field, value in item.items():
                    cmd = cmd.replace("${item." + field + "}", str(value))
            else:
                cmd = cmd.replace("${item}", str(item))
            out[f"{name}@{key}"] = cmd
    return out


def argv_of(cmd: str) -> list[str]:
    """A stage command as this interpreter runs it (`python -m ...` → sys.executable -m ...)."""
    argv = cmd.split()
    if argv[0] == "python":
        return [sys.executable, *argv[1:]]
    if argv[0] == "fabricref":  # the console script is `python -m pipeline.cli`
        return [sys.executable, "-m", "pipeline.cli", *argv[1:]]
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


def run_all(work: Path, profile: Path | None) -> list[Measure]:
    root = copy_checkout(work / "repo")
    rows: list[Measure] = [measure("cold", ["dvc", "repro"], root)]
    moved = lock_differences(root / "dvc.lock", ROOT / "dvc.lock")
    rows.append(measure("no-op repro", ["dvc", "repro"], root))
    per_stage = [measure(f"stage {name}", argv_of(cmd), root) for name, cmd in stages(root).items()]
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
    # The commands rewrote the same bytes with new mtimes: let DVC rehash them now, not inside the cases below.
    subprocess.run(["dvc", "status", "-q"], cwd=root, check=False, capture_output=True)
    if profile is not None:
        profile.mkdir(parents=True, exist_ok=True)
        for name, cmd in stages(root).items():
            argv = argv_of(cmd)
            if argv[1:2] != ["-m"]:
                continue
            out = str((profile / f"{name}.prof").resolve())
            rows.append(measure(f"profile {name}", [sys.executable, "-m", "cProfile", "-o", out, *argv[1:]], root))
    edit_params(root, WORKLOAD, *WORKLOAD_EDIT)
    rows.append(measure("workload", ["dvc", "repro"], root))
    subprocess.run(["git", "checkout", "--", "params.yaml"], cwd=root, check=True)
    rows.append(measure("workload reverted", ["dvc", "repro"], root))
    transcription = root / "sources" / "transcriptions" / f"{SOURCE}.html"
    edit(transcription, *SOURCE_REVISION_EDIT)
    subprocess.run(["fabricref", "pin", SOURCE], cwd=root, check=True, capture_output=True)
    rows.append(measure("source", ["dvc", "repro"], root))
    edit(transcription, *SOURCE_EDIT)
    subprocess.run(["fabricref", "pin", SOURCE], cwd=root, check=True, capture_output=True)
    rows.append(measure("source figure", ["dvc", "repro"], root))
    same = "yes" if not moved else "NO, stages differing: " + ", ".join(moved)
    print(f"outputs of the cold run (dvc.lock outs) identical to the checkout's: {same}")
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
    args = parser.parse_args()
    if shutil.which("dvc") is None or shutil.which("fabricref") is None:
        print("dvc and fabricref must be on PATH (PATH=$PWD/.venv/bin:$PATH)", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="fabricref-bench-"))
    try:
        load = os.getloadavg()
        rows = run_all(work, args.profile)
        print(f"{os.cpu_count()} CPUs, load average before {load[0]:.1f}, after {os.getloadavg()[0]:.1f}")
        print(table(rows))
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
