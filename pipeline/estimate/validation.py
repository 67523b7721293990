"""The model against published results (models/validation/*.yaml): each result's configuration laid onto the
cluster it ran on, estimated like every shipped workload, and the ratio model ÷ published. Pure: it writes
nothing (the validate stage does). A `calibration` result had a throughput number fitted on it, `check` ones
are the acceptance checks, `held-out` ones set nothing: the table keeps them apart, so agreement on a
calibration row is never mistaken for a prediction.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass, fields
from pathlib import Path
from typing import Any, get_args

from ..core.paths import Layout
from ..core.schemas import load_model, load_yaml
from ..errors import FabricrefError, ValidationError
from ..formats.validation import UNITS, Result, Use, ValidationFile
from .workloads import Workload

VALIDATION_DIR = Path("models") / "validation"


@dataclass(frozen=True)
class Row:
    file: str
    result: str
    label: str
    use: str
    target: str
    quantity: str
    unit: str
    published: float
    model: float | None
    ratio: float | None
    tolerance: float
    within: bool | None
    calibration: str  # the calibration numbers the estimate used, with their status
    note: str  # why the model has no value, or the result's own note
    url: str

    def as_tuple(self) -> tuple:
        return astuple(self)


# The table's columns: the row's fields, in order.
COLUMNS = tuple(f.name for f in fields(Row))


def load_files(root: Path) -> list[ValidationFile]:
    """Every validation file, validated (an error names the file, line and field)."""
    out = []
    for path in sorted((root / VALIDATION_DIR).glob("*.yaml")):
        data, doc = load_yaml(path)
        f = load_model(ValidationFile, data, "validation.schema.json", path, doc)
        if f.id != path.stem:
            raise ValidationError(f"{path}: at $.id: {f.id!r} must equal the file name {path.stem!r}")
        out.append(f)
    return out


def workload_of(f: ValidationFile, r: Result) -> Workload:
    """The result's configuration as a workload (the same type the traffic stage lays out)."""
    return Workload(
        id=r.id,
        title=r.label,
        kind="training" if r.training is not None else "inference",
        model=r.model,
        training=r.training,
        inference=r.inference,
        targets=(r.target,),
        shares_with=None,
        path=None,
    )


def run(lay: Layout, views: Any | None = None, only: str | None = None) -> list[Row]:
    """Every published result against the model; `only` keeps the files or results whose id contains it."""
    from .traffic import Views

    own = views or Views(lay)
    try:
        files = load_files(lay.root)
        return [_row(lay, own, f, r) for f in files for r in f.results if not only or only in f.id or only in r.id]
    finally:
        if views is None:
            own.close()


def _row(lay: Layout, views: Any, f: ValidationFile, r: Result) -> Row:
    from .traffic import estimate, step_of

    w = workload_of(f, r)
    value: float | None = None
    calibration = ""
    note = r.note
    try:
        view = views(r.target)
        st = step_of(lay, view, w, estimate(lay, r.target, w, 0, view), views=views)
        # The estimate's figure in the quantity the publication states (a throughput per GPU from the step time
        # with the model FLOPs of `flops.model_flops_per_token`).
        q = r.measured.quantity
        value = st.get("tflops_per_accelerator" if q == "tflops_per_gpu" else q)
        calibration = "\n".join(st.get("calibration", []))
        if value is None:
            note = "; ".join(st.get("missing", [])) or "the model gives no value for this quantity"
        elif st.get("fits") is False:
            note = f"model: does not fit ({-st['headroom_bytes'] / 1e9:.1f} GB short). " + note
    except FabricrefError as exc:
        note = f"not estimated: {exc}"
    published = r.measured.value
    ratio = None if value is None else value / published
    within = None if ratio is None else abs(ratio - 1.0) <= r.tolerance
    return Row(
        file=f.id,
        result=r.id,
        label=r.label,
        use=r.use,
        target=r.target,
        quantity=r.measured.quantity,
        unit=UNITS[r.measured.quantity],
        published=published,
        model=value,
        ratio=ratio,
        tolerance=r.tolerance,
        within=within,
        calibration=calibration,
        note=note,
        url=f.publication.url,
    )


def summary(rows: list[Row]) -> dict[str, Any]:
    """Counts and errors by use (calibration / check / held-out): the figures a report and `dvc metrics` show."""
    out: dict[str, Any] = {}
    for use in get_args(Use):
        chosen = [r for r in rows if r.use == use]
        errors = [abs(r.ratio - 1.0) for r in chosen if r.ratio is not None]
        out[use] = {
            "results": len(chosen),
            "estimated": len(errors),
            "within_tolerance": sum(1 for r in chosen if r.within),
            "mean_abs_error": sum(errors) / len(errors) if errors else None,
            "max_abs_error": max(errors) if errors else None,
        }
    return out
