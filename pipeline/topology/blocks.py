"""One building block (a server or a rack) as a template of parts and links, stamped cheaply many times.
Containment is a node attribute (`within`), never a link; links carry network, per-direction Gb/s, latency, and the
field behind the bandwidth with its status; wiring no source states is a labelled assumption on the edge.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core import confidence
from ..errors import CompileError
from .facts import Defaults, Fact, Facts

PAIRING_NOTE = (
    "assumed pairing: NIC i beside accelerator i (and CPU by position); no source in the registry states the "
    "physical NIC–GPU pairing or PCIe switch placement"
)


@dataclass
class Template:
    """Relative node names with attributes, and links between them; `prefix` makes them unique per block."""

    nodes: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    edges: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    accelerators: list[str] = field(default_factory=list)
    scale_out_nics: list[str] = field(default_factory=list)  # index = rail
    frontend_nics: list[str] = field(default_factory=list)
    root: str = "system"
    nic_speed: Fact | None = None
    frontend_speed: Fact | None = None
    facts: dict[str, Fact] = field(default_factory=dict)

    def node(self, name: str, kind: str, **attrs: Any) -> str:
        self.nodes.append((name, {"kind": kind, **attrs}))
        return name

    def link(self, a: str, b: str, attrs: dict[str, Any]) -> None:
        self.edges.append((a, b, attrs))


def link_attrs(
    network: str,
    gbps: float | None,
    fact: Fact | None,
    latency_ns: float,
    *,
    links: int | None = 1,
    status: str | None = None,
    note: str = "",
) -> dict[str, Any]:
    """A link's attributes; `status` overrides the fact's (an assumed design resting on a fact), the confidence then
    the weaker of the two."""
    fact_confidence = fact.confidence if fact else "assumed"
    own = fact_confidence if status is None else confidence.weakest([fact_confidence, confidence.of_status(status)])
    return {
        "network": network,
        "bandwidth_gbps": None if gbps is None else round(gbps, 6),
        "unit": "Gb/s",
        "direction": "per_direction",
        "links": links,
        "latency_ns": latency_ns,
        "field": fact.key if fact else "",
        "status": status or (fact.status if fact else "assumed"),
        "confidence": own,
        "note": note,
    }


def _scale_up(t: Template, facts: Facts, dflt: Defaults, gpus: list[str], switches: list[str]) -> None:
    per_acc = facts.get("scale_up.bandwidth_per_accelerator", required=False)
    lat = dflt.latency_ns["scale_up"]
    if switches:
        share = None if not per_acc.known else per_acc.gbps() / len(switches)  # type: ignore[operator]
        note = f"per-accelerator scale-up bandwidth split evenly over {len(switches)} switch node(s)"
        attrs = link_attrs("scale_up", share, per_acc, lat, note=note)
        for g in gpus:
            for s in switches:
                t.link(g, s, attrs)
        return
    per_link = facts.get("scale_up.bandwidth_per_link", required=False)
    if per_link.known:
        gbps, fact, note = per_link.gbps(), per_link, "direct link between two accelerators"
    elif per_acc.known:
        gbps = per_acc.gbps() / (len(gpus) - 1)  # type: ignore[operator]
        fact, note = per_acc, f"per-accelerator bandwidth split evenly over {len(gpus) - 1} direct links"
    else:
        gbps, fact, note = None, per_link, "bandwidth unknown: no source or assumption states it"
    attrs = link_attrs("scale_up", gbps, fact, lat, note=note)
    for i, a in enumerate(gpus):
        for b in gpus[i + 1 :]:
            t.link(a, b, attrs)


def _host_wiring(
    t: Template, dflt: Defaults, gpus: list[str], cpus: list[str], nics: list[str], fnics: list[str]
) -> None:
    host_fact = Fact("host_link", dflt.host_gbps, "Gb/s", "per_direction", "assumed", dflt.host_why)
    host = link_attrs("host", dflt.host_gbps, host_fact, dflt.latency_ns["host"], status="assumed", note=dflt.host_why)
    paired = link_attrs("host", dflt.host_gbps, host_fact, dflt.latency_ns["host"], status="assumed", note=PAIRING_NOTE)
    for i, g in enumerate(gpus):
        t.link(g, cpus[i * len(cpus) // len(gpus)], host)
    for i, n in enumerate(nics):
        t.link(n, gpus[i * len(gpus) // len(nics)], paired)
        t.link(n, cpus[i * len(cpus) // len(nics)], host)
    for i, f in enumerate(fnics):
        t.link(f, cpus[i * len(cpus) // len(fnics)], host)


def server_template(facts: Facts, dflt: Defaults) -> Template:
    t = Template()
    n_sw = facts.count("scale_up.switch.count")
    _check_domain(facts, facts.count("accelerator.count"))
    t.node("system", "system", role="server", label=facts.title)
    t.node("baseboard", "tray", role="accelerator_baseboard", within="system", label="accelerator baseboard")
    t.node("host-tray", "tray", role="cpu_tray", within="system", label="CPU / host tray")
    counts = ("cpu.count", "accelerator.count", "scale_out.nic.count", "frontend.nic.count")
    cpus, gpus, nics, fnics = _parts(t, facts, "", counts, gpu_within="baseboard", host_within="host-tray")
    label = facts.text("scale_up.technology") or "scale-up switch"
    sw_assumed = _assumed(facts, "scale_up.switch.count")
    switches = [
        t.node(f"sus{i}", "scale_up_switch", within="baseboard", label=label, assumed=sw_assumed) for i in range(n_sw)
    ]
    _scale_up(t, facts, dflt, gpus, switches)
    _host_wiring(t, dflt, gpus, cpus, nics, fnics)
    _finish(t, facts, gpus, nics, fnics)
    return t


def rack_template(facts: Facts, dflt: Defaults) -> Template:
    t = Template()
    trays = facts.count("tray.compute.count")
    per_tray_gpu = facts.count("tray.compute.accelerators")
    switch_trays = facts.count("tray.switch.count")
    chips = facts.get("scale_up.switch.count", required=False)
    _check_domain(facts, trays * per_tray_gpu)
    t.node("system", "system", role="rack", label=facts.title)
    counts = tuple(f"tray.compute.{part}" for part in ("cpus", "accelerators", "scale_out_nics", "frontend_nics"))
    gpus: list[str] = []
    nics: list[str] = []
    fnics: list[str] = []
    trays_assumed = _assumed(facts, "tray.compute.count")
    for k in range(trays):
        tray = t.node(
            f"ct{k}", "tray", role="compute", within="system", label=f"compute tray {k}", assumed=trays_assumed
        )
        cpus, tg, tn, tf = _parts(
            t, facts, f"ct{k}/", counts, gpu_within=tray, host_within=tray, index_base=k * per_tray_gpu
        )
        _host_wiring(t, dflt, tg, cpus, tn, tf)
        gpus += tg
        nics += tn
        fnics += tf
    per_switch_tray = 1
    aggregate = True
    if chips.known and chips.value and int(chips.value) % switch_trays == 0:
        per_switch_tray, aggregate = int(chips.value) // switch_trays, False
    switches = []
    st_assumed = _assumed(facts, "tray.switch.count")
    for s in range(switch_trays):
        tray = t.node(
            f"st{s}", "tray", role="switch", within="system", label=f"scale-up switch tray {s}", assumed=st_assumed
        )
        for c in range(per_switch_tray):
            label = "aggregate of this tray's switch chips (chip count not stated)" if aggregate else "switch chip"
            switches.append(t.node(f"st{s}/sw{c}", "scale_up_switch", within=tray, label=label, aggregate=aggregate))
    _scale_up(t, facts, dflt, gpus, switches)
    _finish(t, facts, gpus, nics, fnics)
    return t


def _parts(
    t: Template,
    facts: Facts,
    prefix: str,
    counts: tuple[str, str, str, str],
    *,
    gpu_within: str,
    host_within: str,
    index_base: int = 0,
) -> tuple[list[str], list[str], list[str], list[str]]:
    """CPUs, accelerators, backend NICs (one rail each) and frontend NICs of one server or compute tray, as many as
    the `counts` fields state (in that order); a part whose count rests on an assumption says so (`assumed`)."""
    n_cpu, n_gpu, n_nic, n_fnic = (facts.count(key) for key in counts)
    cpu_assumed, nic_assumed, fnic_assumed = (_assumed(facts, key) for key in (counts[0], counts[2], counts[3]))
    cpu, gpu = facts.text("cpu.model") or "CPU", facts.text("accelerator.model") or "GPU"
    nic, fnic = facts.text("scale_out.nic.model") or "backend NIC", facts.text("frontend.nic.model") or "frontend NIC"
    p, host = prefix, host_within
    cpus = [t.node(f"{p}cpu{i}", "cpu", within=host, label=cpu, assumed=cpu_assumed) for i in range(n_cpu)]
    gpus = [
        t.node(f"{p}gpu{i}", "accelerator", within=gpu_within, label=gpu, index=index_base + i) for i in range(n_gpu)
    ]
    nics = [
        t.node(f"{p}nic{i}", "nic", role="scale_out", rail=i, within=host, label=nic, assumed=nic_assumed)
        for i in range(n_nic)
    ]
    fnics = [
        t.node(f"{p}fnic{i}", "nic", role="frontend", within=host, label=fnic, assumed=fnic_assumed)
        for i in range(n_fnic)
    ]
    return cpus, gpus, nics, fnics


def _assumed(facts: Facts, key: str) -> bool:
    """Whether a part counted by `key` exists on a labelled assumption (the `assumed` of its nodes)."""
    return facts.get(key, required=False).status == "assumed"


def _check_domain(facts: Facts, accelerators: int) -> None:
    domain = facts.get("scale_up.domain_size", required=False)
    if domain.known and int(domain.value) != accelerators:  # type: ignore[arg-type]
        raise CompileError(
            f"reference {facts.reference_id}: scale_up.domain_size is {domain.value:g} but the block holds "
            f"{accelerators} accelerators; a block must be exactly one scale-up domain"
        )


def _finish(t: Template, facts: Facts, gpus: list[str], nics: list[str], fnics: list[str]) -> None:
    t.accelerators, t.scale_out_nics, t.frontend_nics = gpus, nics, fnics
    t.nic_speed = facts.get("scale_out.nic.speed")
    t.frontend_speed = facts.get("frontend.nic.speed", required=False)


def template(facts: Facts, dflt: Defaults) -> Template:
    if facts.form_factor == "server":
        return server_template(facts, dflt)
    if facts.form_factor == "rack":
        return rack_template(facts, dflt)
    raise CompileError(f"reference {facts.reference_id} is a {facts.form_factor}: build it as a cluster")
