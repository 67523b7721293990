"""A workload's phases on a topology: decompose (`demand.py`), place the ranks, cost (`cost.py`).

Placement here is the first-fit one the costing was written for: rank r on the topology's accelerator
offset + r (topology order fills one scale-up domain after another), with every group that must stay inside
one scale-up domain checked. `placement.py` + `routing.py` + `loads.py` place every group and route it.
"""

from __future__ import annotations

from ..core.errors import UsageError
from .cost import Phase, cost
from .demand import Communication, Demand, decompose
from .view import View
from .workloads import Workload


def phases(view: View, w: Workload, offset: int = 0) -> list[Phase]:
    """Every phase of `w` with its ranks placed from accelerator `offset` on; the wiring is not changed."""
    demand = decompose(w)
    accelerators = place(view, demand, offset)
    return [cost(view, comm, members(comm, accelerators)) for comm in demand.communications]


def place(view: View, demand: Demand, offset: int = 0) -> list[str]:
    """The accelerator of each rank (index = rank); a workload larger than what is left of the topology, or a
    tensor-parallel group beyond or across scale-up domains, is refused with what to change."""
    view.check_size(offset + demand.ranks, f"workload {demand.workload_id}")
    accelerators = view.accelerators[offset : offset + demand.ranks]
    for comm in demand.communications:
        if comm.one_domain is not None:
            check_one_domain(view, comm, members(comm, accelerators))
    return accelerators


def members(comm: Communication, accelerators: list[str]) -> list[str]:
    """The accelerators of a communication's representative group."""
    return [accelerators[r] for r in comm.group]


def check_one_domain(view: View, comm: Communication, group: list[str]) -> None:
    """Tensor parallelism must stay inside one scale-up domain."""
    tp, what, reference = len(group), comm.one_domain, view.reference
    if tp > view.domain_size:
        raise UsageError(
            f"{what}: tensor parallel degree {tp} exceeds the scale-up domain of {reference} "
            f"({view.domain_size} accelerators); tensor parallelism must stay inside one scale-up domain"
        )
    if len({view.domain(a) for a in group}) > 1:
        raise UsageError(
            f"{what}: the tensor-parallel group would straddle two scale-up domains of {reference}; "
            f"choose a degree that divides the domain size {view.domain_size}"
        )
