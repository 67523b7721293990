"""A plan's rows as Parquet under the checkout's plans/ folder, and a chosen layout saved as a workload.

plans/ is git-ignored and outside every DVC output: a plan is asked for on demand and never part of `dvc repro`.
Each search writes one file, `plans/<plan id>.parquet` (the same request rewrites its file), which `fabricref query`
reads as the `plans` table (every file at once, columns matched by name, so training and serving plans share it).

`--save ID` writes `models/workloads/ID.yaml` (the model, its shape, the choices that are not knobs: ZeRO stage,
recompute, sequence parallelism) and `workloads.ID` in params.yaml (the knobs: degrees, batch, sequence — their one
home), so the traffic stage carries it on the next `dvc repro`.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

from ..core.paths import Layout as Checkout
from ..core.paths import check_slug
from ..errors import FabricrefError, UsageError, ValidationError

# Every column a plan row may carry, with its DuckDB type; a kind's rows leave the others null.
COLUMNS: list[tuple[str, str]] = [
    ("plan_id", "VARCHAR"),
    ("kind", "VARCHAR"),
    ("model", "VARCHAR"),
    ("cluster", "VARCHAR"),
    ("objective", "VARCHAR"),
    ("layout_id", "VARCHAR"),
    ("rank", "INTEGER"),
    ("pareto", "BOOLEAN"),
    ("status", "VARCHAR"),
    ("fits", "BOOLEAN"),
    ("reason", "VARCHAR"),
    ("gpus", "INTEGER"),
    ("tp", "INTEGER"),
    ("pp", "INTEGER"),
    ("dp", "INTEGER"),
    ("cp", "INTEGER"),
    ("ep", "INTEGER"),
    ("micro_batch", "INTEGER"),
    ("microbatches", "INTEGER"),
    ("zero", "INTEGER"),
    ("recompute", "VARCHAR"),
    ("schedule", "VARCHAR"),
    ("virtual_stages", "INTEGER"),
    ("seq_len", "INTEGER"),
    ("global_batch", "INTEGER"),
    ("mode", "VARCHAR"),
    ("prefill_tp", "INTEGER"),
    ("decode_tp", "INTEGER"),
    ("batch", "INTEGER"),
    ("prefill_groups", "INTEGER"),
    ("decode_groups", "INTEGER"),
    ("groups", "INTEGER"),
    ("prompt_tokens", "INTEGER"),
    ("output_tokens", "INTEGER"),
    ("requests_per_second", "DOUBLE"),
    ("memory_per_rank_bytes", "DOUBLE"),
    ("usable_memory_bytes", "DOUBLE"),
    ("headroom_bytes", "DOUBLE"),
    ("step_lower_bound_seconds", "DOUBLE"),
    ("step_seconds", "DOUBLE"),
    ("compute_seconds", "DOUBLE"),
    ("bubble_seconds", "DOUBLE"),
    ("exposed_communication_seconds", "DOUBLE"),
    ("communication_seconds", "DOUBLE"),
    ("routed_step_seconds", "DOUBLE"),
    ("routed_exposed_communication_seconds", "DOUBLE"),
    ("ttft_seconds", "DOUBLE"),
    ("tpot_seconds", "DOUBLE"),
    ("request_seconds", "DOUBLE"),
    ("meets_targets", "BOOLEAN"),
    ("tokens_per_second", "DOUBLE"),
    ("gpu_hours_per_step", "DOUBLE"),
    ("gpu_hours_per_million_tokens", "DOUBLE"),
    ("objective_value", "DOUBLE"),
    ("dominant", "VARCHAR"),
    ("must_talk", "INTEGER"),
    ("largest_group", "INTEGER"),
    ("largest_group_phase", "VARCHAR"),
    ("largest_group_domains", "INTEGER"),
    ("confidence", "VARCHAR"),
    ("costing", "VARCHAR"),
    ("hot_links", "VARCHAR"),
]
NAMES = [c for c, _ in COLUMNS]


def plans_dir(lay: Checkout) -> Path:
    return lay.plans_dir


def table_rows(result: Any) -> list[list[Any]]:
    """The result's rows in the table's columns (its request's model, cluster, objective on every row)."""
    fixed = {
        "plan_id": result.plan_id,
        "kind": result.kind,
        "model": result.request["model"],
        "cluster": result.request["cluster"],
        "objective": result.request["objective"],
    }
    unknown = {k for r in result.rows[:1] for k in r} - set(NAMES) - {"plan_id"}
    if unknown:
        raise FabricrefError(f"internal: plan rows carry columns the plans table does not declare: {sorted(unknown)}")
    return [[{**r, **fixed}.get(name) for name in NAMES] for r in result.rows]


def write(lay: Checkout, result: Any) -> Path:
    """plans/<plan id>.parquet, written atomically (the rows sorted by layout id: the same plan, the same bytes)."""
    from ..core.registry import write_table

    return write_table(plans_dir(lay), result.plan_id, COLUMNS, ["layout_id"], table_rows(result))


# --- --save: a layout as a workload the pipeline carries ---------------------------------------------------------


def _refuse_existing(lay: Checkout, workload_id: str) -> Path:
    try:
        check_slug(workload_id, "workload id")
    except ValidationError as exc:
        raise UsageError(f"--save: {exc}") from None
    path = lay.root / "models" / "workloads" / f"{workload_id}.yaml"
    if path.exists():
        raise UsageError(f"--save {workload_id}: {lay.relative(path)} exists; a workload id is kept: choose another")
    return path


def _yaml_text(data: dict[str, Any]) -> str:
    from ..core.schemas import dump_yaml

    return dump_yaml(data)


def _params_with(params: Path, workload_id: str, knobs: dict[str, Any]) -> bytes:
    """params.yaml with `workloads.<id>` added in id order, every comment and other key kept (ruamel round trip)."""
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap

    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 120
    doc = yaml.load(params.read_text(encoding="utf-8"))
    workloads = doc.get("workloads")
    if workloads is None:
        doc["workloads"] = workloads = CommentedMap()
    if workload_id in workloads:
        raise UsageError(f"--save {workload_id}: {params.name} already has workloads.{workload_id}")
    entry = CommentedMap(knobs)
    at = sum(1 for k in workloads if str(k) < workload_id)
    workloads.insert(at, workload_id, entry)
    buf = io.StringIO()
    yaml.dump(doc, buf)
    return buf.getvalue().encode()


def save_workload(
    lay: Checkout, workload_id: str, kind: str, data: dict[str, Any], knobs: dict[str, Any]
) -> list[Path]:
    """Write the workload file and its params.yaml knobs: both validated first (the merged workload loaded as the
    traffic stage loads it), then written under the checkout's lock; a failed second write removes the first."""
    from ..core.files import atomic_write_bytes, exclusive_lock
    from ..core.paths import PARAMS_FILE
    from ..core.pins import lock_path
    from ..estimate.workloads import load_workload

    path = _refuse_existing(lay, workload_id)
    params = lay.root / PARAMS_FILE
    text = _yaml_text(data).encode()
    with exclusive_lock(lock_path(lay)):
        new_params = _params_with(params, workload_id, knobs)
        # Validate the pair as the pipeline will read it: in a scratch copy of the checkout's two files.
        import tempfile

        with tempfile.TemporaryDirectory(prefix="fabricref-save-") as tmp:
            scratch = Path(tmp)
            (scratch / "models" / "workloads").mkdir(parents=True)
            for other in (lay.root / "models" / "workloads").glob("*.yaml"):
                (scratch / "models" / "workloads" / other.name).write_bytes(other.read_bytes())
            (scratch / PARAMS_FILE).write_bytes(new_params)
            candidate = scratch / "models" / "workloads" / path.name
            candidate.write_bytes(text)
            load_workload(candidate)
        atomic_write_bytes(path, text)
        try:
            atomic_write_bytes(params, new_params)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            raise
    return [path, params]
