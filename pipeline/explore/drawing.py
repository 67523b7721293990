"""A large cluster opened at one pod or one scale-up domain (`open`: 'pod:N', 'domain:ID'): the explorer's way down
from the tiers × pods drawing that views/drawing.py draws for it (and the report shows)."""

from __future__ import annotations

from ..errors import InputError
from ..views.drawing import PART_ROWS, Drawn, Groups

# Rows of a pod's drawing, top first: its fabric above its domains.
FABRIC_ROWS = {"core": 0, "spine": 1, "leaf": 2, "domain": 3, "frontend_switch": 4, "frontend_core": 5}


class Opened(Groups):
    """A topology's drawings (`Groups`), and for an aggregated one also each pod and each scale-up domain."""

    def check_level(self, open: str | None) -> str:
        level = open or self.default_level()
        if level in ("full", "aggregate"):
            return super().check_level(level)
        what, _, name = level.partition(":")
        if not self.aggregated:
            raise InputError(
                f"topology {self.topology_id} is drawn part by part: it has no {what} to open", ("query", "open")
            )
        if what == "pod" and int(name) not in self.domains_by_pod:
            raise InputError(
                f"topology {self.topology_id} has no pod {name} (pods: 0–{max(self.domains_by_pod)})",
                ("query", "open"),
            )
        if what == "domain" and name not in self.pod_of and name not in self.domains_by_pod.get(0, []):
            raise InputError(
                f"topology {self.topology_id} has no scale-up domain {name!r} (e.g. "
                f"{self.domains_by_pod[min(self.domains_by_pod)][0]})",
                ("query", "open"),
            )
        return level

    def _draw(self, level: str, drawn: Drawn) -> bool:
        what, _, name = level.partition(":")
        if what == "pod":
            self._pod(int(name), drawn)
            return False
        if what == "domain":
            self._domain(name, drawn)
            return True
        return super()._draw(level, drawn)

    def _pod(self, p: int, drawn: Drawn) -> None:
        """Pod `p`'s leaves and spines one by one, the cores and the frontend as one node each."""
        g, kind = self.g, self.kind
        size = self.view.domain_size
        cores = sum(1 for n in g.nodes if kind[n] == "core")
        if cores:
            drawn.aggregate("cores", "core", f"{cores:,} core switches", cores, 0)
        fe = 0
        for n in g.nodes:
            k = kind[n]
            if k in ("leaf", "spine") and int(g.nodes[n].get("pod") or 0) == p:
                drawn.part(n, row=FABRIC_ROWS[k])
            elif k == "core":
                drawn.assign[n] = "cores"
            elif k == "frontend_switch":
                drawn.assign[n] = "frontend"
                fe += 1
        if fe:
            drawn.aggregate("frontend", "frontend_switch", f"frontend ({fe:,} switches)", fe, 4)
        # The pod's domains as one node wired to each leaf (a pod of 64 domains on 16 leaves is 512 NIC
        # links, a solid block if drawn one by one), and each domain once more below as a box to open.
        mine = set(self.domains_by_pod[p])
        doms = len(mine)
        drawn.aggregate(f"pod{p}/domains", "domain", f"{doms:,} domains ({doms * size:,} acc.)", doms, 3)
        for dom in self.domains_by_pod[p]:
            drawn.aggregate(f"domain:{dom}", "domain", dom, 1, 5, opens=f"domain:{dom}")
        for n, dom in self.domain_of.items():
            if dom in mine:
                drawn.assign[n] = f"pod{p}/domains"
                if kind[n] == "nic":
                    drawn.scan.append(n)

    def _domain(self, dom: str, drawn: Drawn) -> None:
        """One scale-up domain part by part, the leaves (and frontend switches) it reaches, their spines as one."""
        g, kind = self.g, self.kind
        inside = [n for n, d in self.domain_of.items() if d == dom]
        drawn.parts(inside)
        reached: dict[str, None] = {}
        for n in inside:
            for m in g[n]:
                if m not in drawn.assign and kind[m] in ("leaf", "frontend_switch"):
                    reached[m] = None
        spines = 0
        for m in reached:
            drawn.part(m, container="", failable=True)
            for s in g[m]:
                if kind[s] == "spine":
                    drawn.assign[s] = "spines"
                    spines += 1
        if spines:
            count = len({s for s, a in drawn.assign.items() if a == "spines"})
            drawn.aggregate("spines", "spine", f"{count:,} spines", count, PART_ROWS["spine"])
