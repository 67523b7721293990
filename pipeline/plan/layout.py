"""One training layout: the degrees and choices the planner searches (plan/space.py), a plan's rows store
(plans/, with `virtual_stages` for v) and the explorer's plan page shows (explore/models.py `PlanLayout`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

# A plan row's column for a field whose name there is longer.
COLUMNS = {"v": "virtual_stages"}


class Layout(NamedTuple):
    """One point of the space (a tuple: cheap to build, hash, sort and send to a worker by the hundred thousand)."""

    gpus: int
    tp: int
    pp: int
    dp: int
    cp: int
    ep: int
    micro_batch: int
    microbatches: int
    zero: int
    recompute: str
    schedule: str
    v: int

    @classmethod
    def of_row(cls, row: Mapping[str, Any]) -> Layout:
        """The layout a plan row states."""
        return cls(*(row[COLUMNS.get(name, name)] for name in cls._fields))

    @property
    def id(self) -> str:
        """A stable name: the same layout gets the same id in every run (the key of a plan's rows)."""
        sched = "1f1b" if self.schedule == "1f1b" else f"interleaved{self.v}"
        return (
            f"tp{self.tp}-pp{self.pp}-dp{self.dp}-cp{self.cp}-ep{self.ep}-mb{self.micro_batch}x{self.microbatches}"
            f"-zero{self.zero}-{self.recompute}-{sched}"
        )

    def describe(self) -> str:
        parts = [f"TP {self.tp}", f"PP {self.pp}", f"DP {self.dp}"]
        parts += [f"CP {self.cp}"] if self.cp > 1 else []
        parts += [f"EP {self.ep}"] if self.ep > 1 else []
        sched = "1F1B" if self.schedule == "1f1b" else f"interleaved 1F1B (v = {self.v})"
        return (
            f"{' × '.join(parts)}, micro-batch {self.micro_batch} × {self.microbatches}, ZeRO-{self.zero}, "
            f"{self.recompute} recompute, {sched}"
        )


ROW_COLUMNS = tuple(COLUMNS.get(name, name) for name in Layout._fields)  # each field's column, in order
