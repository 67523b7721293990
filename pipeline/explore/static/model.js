// The model page: the topology drawn from its graph (plain SVG, positions computed by the server), a workload
// laid onto it with knobs, its per-link load as a heat map, and parts failed by clicking them. The whole view
// (topology, level, workload, knobs, failures, heat basis, selection) lives in the URL.
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  const $ = (id) => document.getElementById(id);
  const { el, svg } = FR;
  const topologySel = $("topology");
  const workloadSel = $("workload");
  const heatSel = $("heat");
  const NETWORK_COLOUR = { scale_up: "#6a3d9a", scale_out: "#1f78b4", frontend: "#33a02c", host: "#8c8c8c" };
  const NETWORK_NAME = { scale_up: "scale-up", scale_out: "scale-out", frontend: "frontend", host: "host (PCIe / C2C)" };
  const KIND_FILL = {
    accelerator: "#2e7d32", cpu: "#1565c0", nic: "#ef6c00", scale_up_switch: "#6a1b9a", leaf: "#37474f",
    spine: "#455a64", core: "#263238", frontend_switch: "#558b2f", domain: "#2e7d32", pod: "#fafafa",
  };
  const KIND_NAME = {
    accelerator: "accelerator", cpu: "CPU", nic: "NIC", scale_up_switch: "scale-up switch", leaf: "leaf switch",
    spine: "spine switch", core: "core switch", frontend_switch: "frontend switch", domain: "scale-up domain",
    tray: "tray", system: "system",
  };
  const KNOB_LABELS = {
    tp: "TP", pp: "PP", dp: "DP", ep: "EP", cp: "CP", micro_batch: "micro-batch", microbatches: "micro-batches per replica",
    seq_len: "sequence length", prefill_tp: "prefill TP", decode_tp: "decode TP", batch: "batch",
    prompt_tokens: "prompt tokens", output_tokens: "output tokens", requests_per_second: "requests/s",
    mode: "serving", placement: "placement",
  };
  const CHOICES = { mode: ["aggregated", "disaggregated"], placement: ["fill-domains", "spread"] };

  const S = { topology: null, open: null, workload: "", knobs: {}, fail: [], heat: "time", sel: null, phase: null };
  let drawing = null;
  let estimate = null;
  let drawSeq = 0;
  let estSeq = 0;

  // -- state ----------------------------------------------------------------------------------------------------

  function optionFor(select, value) {
    return [...select.options].find((o) => o.value === value);
  }

  function readState() {
    const topology = FR.state.get("topology");
    S.topology = optionFor(topologySel, topology) ? topology : (optionFor(topologySel, "nvidia-dgx-h100") ? "nvidia-dgx-h100" : topologySel.options[0].value);
    S.open = FR.state.get("open");
    const workload = FR.state.get("workload") || "";
    S.workload = optionFor(workloadSel, workload) ? workload : "";
    S.heat = FR.state.get("heat") === "bytes" ? "bytes" : "time";
    S.fail = FR.state.all("fail").filter((f) => /^[A-Za-z0-9][A-Za-z0-9_.\-/]*(~[A-Za-z0-9][A-Za-z0-9_.\-/]*)?$/.test(f));
    S.sel = FR.state.get("sel");
    S.phase = FR.state.get("phase");
    S.knobs = {};
    if (S.workload) {
      for (const name of knobNames()) {
        const v = FR.state.get(name);
        if (v !== null) S.knobs[name] = v;
      }
    }
    topologySel.value = S.topology;
    workloadSel.value = S.workload;
    heatSel.value = S.heat;
  }

  function writeState() {
    const values = { topology: S.topology, open: S.open, workload: S.workload, heat: S.heat === "time" ? null : S.heat,
      fail: S.fail, sel: S.sel, phase: S.phase };
    for (const name of Object.keys(KNOB_LABELS)) values[name] = S.workload && name in S.knobs ? S.knobs[name] : null;
    FR.state.set(values);
  }

  /** Workloads larger than the chosen topology stay listed, marked and not selectable. */
  function markWorkloads() {
    for (const o of workloadSel.options) {
      if (!o.value) continue;
      const fits = o.dataset.fits.split(" ").includes(S.topology);
      o.disabled = !fits && o.value !== S.workload;
      o.textContent = o.textContent.replace(/ \(needs more accelerators\)$/, "") + (fits ? "" : " (needs more accelerators)");
    }
  }

  function workloadOption() {
    return S.workload ? optionFor(workloadSel, S.workload) : null;
  }

  function knobNames() {
    const o = workloadOption();
    return o ? o.dataset.knobNames.split(" ").filter(Boolean) : [];
  }

  function knobDefaults() {
    const o = workloadOption();
    return o ? JSON.parse(o.dataset.knobs) : {};
  }

  // -- knobs ----------------------------------------------------------------------------------------------------

  function buildKnobs() {
    const box = $("knob-inputs");
    box.replaceChildren();
    $("knobs").hidden = !S.workload;
    $("knob-error").hidden = true;
    if (!S.workload) return;
    const defaults = knobDefaults();
    for (const name of knobNames()) {
      const value = name in S.knobs ? S.knobs[name] : defaults[name];
      let input;
      if (CHOICES[name]) {
        input = el("select", { id: `knob-${name}`, name }, CHOICES[name].map((c) => el("option", { value: c, selected: String(value) === c }, c)));
      } else {
        input = el("input", { id: `knob-${name}`, name, type: "number", min: name === "requests_per_second" ? 0 : 1,
          step: name === "requests_per_second" ? "any" : 1, value: value ?? "" });
      }
      input.addEventListener("change", () => {
        const v = input.value;
        if (String(defaults[name]) === v || v === "") delete S.knobs[name];
        else S.knobs[name] = v;
        if (name === "mode") showModeKnobs();
        writeState();
        runEstimate();
      });
      box.append(el("label", { class: "knob", dataset: { knob: name } }, KNOB_LABELS[name] || name, input,
        el("span", { class: "knob-msg", id: `knob-msg-${name}`, role: "alert" })));
    }
    showModeKnobs();
  }

  /** A serving workload shows TP when aggregated, the two pools' TP when disaggregated. */
  function showModeKnobs() {
    const mode = $("knob-mode");
    if (!mode) return;
    const disaggregated = mode.value === "disaggregated";
    for (const [name, show] of [["tp", !disaggregated], ["prefill_tp", disaggregated], ["decode_tp", disaggregated]]) {
      const label = document.querySelector(`.knob[data-knob="${name}"]`);
      if (label) label.hidden = !show;
    }
  }

  function knobValues() {
    const out = {};
    for (const [k, v] of Object.entries(S.knobs)) {
      const label = document.querySelector(`.knob[data-knob="${k}"]`);
      if (label && label.hidden) continue;  // the other serving mode's pool size, which the server refuses
      if (CHOICES[k]) out[k] = v;
      else {
        const n = Number(v);
        out[k] = Number.isFinite(n) ? n : v;
      }
    }
    return out;
  }

  function showKnobError(err) {
    document.querySelectorAll(".knob-msg").forEach((m) => { m.textContent = ""; });
    document.querySelectorAll(".knob.invalid").forEach((m) => m.classList.remove("invalid"));
    const general = [];
    for (const d of err.detail || [{ loc: [], msg: err.message }]) {
      const loc = d.loc || [];
      const knob = loc[0] === "body" && loc[1] === "knobs" ? loc[2] : null;
      const msg = $(`knob-msg-${knob}`);
      if (knob && msg) {
        msg.textContent = d.msg;
        msg.closest(".knob").classList.add("invalid");
      } else general.push(d.msg);
    }
    const box = $("knob-error");
    box.textContent = general.join("; ");
    box.hidden = general.length === 0;
  }

  // -- the drawing ------------------------------------------------------------------------------------------------

  // -- progress -------------------------------------------------------------------------------------------------

  /** What is being computed, with the seconds it has taken so far once it passes half a second (the first
   * drawing or estimate on the largest clusters loads a graph of a million links and takes seconds). */
  let busyTimer = null;
  function busy(text) {
    const started = performance.now();
    const status = $("status");
    clearInterval(busyTimer);
    status.textContent = text;
    status.dataset.busy = "yes";
    const bigger = topologySel.selectedOptions[0] && Number(topologySel.selectedOptions[0].dataset.accelerators) > 50000;
    busyTimer = setInterval(() => {
      const s = (performance.now() - started) / 1000;
      if (s < 0.5) return;
      const note = bigger ? " — a cluster this large takes a few seconds the first time its graph is loaded" : "";
      status.textContent = `${text} ${s.toFixed(1)} s${note}`;
    }, 250);
  }
  function idle(text) {
    clearInterval(busyTimer);
    busyTimer = null;
    $("status").dataset.busy = "no";
    $("status").textContent = text;
  }

  async function loadDrawing() {
    const seq = ++drawSeq;
    $("drawing").dataset.ready = "no";
    busy("Drawing…");
    const q = S.open ? `?open=${encodeURIComponent(S.open)}` : "";
    try {
      // A drawing past the server's time limit (503) goes on being computed there and is kept: ask again.
      let d = null;
      for (let tries = 0; d === null; tries++) {
        try {
          d = await FR.request(`/api/model/${encodeURIComponent(S.topology)}${q}`);
        } catch (err) {
          if (err.status !== 503 || tries >= 5 || seq !== drawSeq) throw err;
        }
      }
      if (seq !== drawSeq) return;
      drawing = d;
      render();
      $("drawing").dataset.ready = "yes";
      idle("");
    } catch (err) {
      if (seq !== drawSeq) return;
      if (S.open) { S.open = null; writeState(); loadDrawing(); return; }
      idle(err.message);
    }
  }

  function shortLabel(n) {
    const tail = n.id.split("/").pop();
    return n.kind === "accelerator" || n.kind === "scale_up_switch" || n.kind === "cpu" ? tail : "";
  }

  function render() {
    const d = drawing;
    const nodes = new Map(d.nodes.map((n) => [n.id, n]));
    const root = svg("svg", { viewBox: `0 0 ${d.width} ${d.height}`, width: "100%", class: "topology",
      preserveAspectRatio: "xMidYMin meet", dataset: { topology: d.topology_id, level: d.level } });
    root.style.maxHeight = `${Math.max(420, Math.min(d.height * 1.6, 1400))}px`;
    root.style.maxWidth = `${Math.max(640, d.width * 1.5)}px`;  // a small drawing is not blown up
    const boxes = svg("g", { class: "boxes" });
    const lines = svg("g", { class: "links" });
    const parts = svg("g", { class: "nodes" });
    for (const n of d.nodes.filter((n) => n.row < 0 || n.kind === "pod")) {
      if (n.w <= 0) continue;
      const label = n.label.length * 5.6 < n.w - 8 ? n.label : n.id.split("/").pop();
      const g = svg("g", { class: `box box-${n.kind}`, dataset: { id: n.id, kind: n.kind, opens: n.opens || "" } },
        svg("rect", { x: n.x, y: n.y, width: n.w, height: n.h, rx: 4, fill: n.kind === "system" ? "#fbfbfb" : "#f3f6fa", stroke: "#b0bec5" }),
        svg("text", { x: n.x + 5, y: n.y + 11, class: "box-label" }, label));
      boxes.append(g);
    }
    const widthOf = (l) => {
      if (l.network === "host") return 0.8;
      const lanes = Math.log2(1 + l.links);
      return Math.min(5, 0.9 + lanes * 0.6);
    };
    for (const l of d.links) {
      const a = nodes.get(l.source);
      const b = nodes.get(l.target);
      if (!a || !b) continue;
      const [top, bottom] = a.y <= b.y ? [a, b] : [b, a];
      const sameRow = Math.abs(top.y - bottom.y) < 1;
      const x1 = top.x + top.w / 2;
      const y1 = sameRow ? top.y + top.h / 2 : top.y + top.h;
      const x2 = bottom.x + bottom.w / 2;
      const y2 = sameRow ? bottom.y + bottom.h / 2 : bottom.y;
      const line = svg("line", { x1, y1, x2, y2, class: `link net-${l.network}${l.failable ? " failable" : ""}`,
        stroke: NETWORK_COLOUR[l.network], "stroke-width": widthOf(l), "stroke-opacity": l.network === "host" ? 0.55 : 0.75,
        dataset: { id: l.id, network: l.network, source: l.source, target: l.target, width: widthOf(l) } });
      lines.append(line);
    }
    for (const n of d.nodes.filter((n) => n.row >= 0 && n.kind !== "pod")) {
      const agg = n.aggregate;
      const g = svg("g", { class: `node kind-${n.kind}${n.failable ? " failable" : ""}${n.opens ? " opens" : ""}`,
        dataset: { id: n.id, kind: n.kind, opens: n.opens || "", role: n.role || "" } },
        svg("rect", { x: n.x, y: n.y, width: n.w, height: n.h, rx: agg ? 6 : 3,
          fill: agg ? "#ffffff" : KIND_FILL[n.kind] || "#607d8b", stroke: agg ? KIND_FILL[n.kind] || "#607d8b" : "#ffffff",
          "stroke-width": agg ? 1.6 : 0.8 }));
      if (agg) {
        g.append(svg("text", { x: n.x + n.w / 2, y: n.y + n.h / 2 + 4, class: "agg-label", "text-anchor": "middle" }, n.label));
      } else if (shortLabel(n)) {
        g.append(svg("text", { x: n.x + n.w / 2, y: n.y + n.h / 2 + 3, class: "part-label", "text-anchor": "middle" }, shortLabel(n)));
      }
      parts.append(g);
    }
    root.append(boxes, lines, parts);
    $("drawing").replaceChildren(root);
    renderLevels();
    renderLegend();
    paint();
  }

  function renderLevels() {
    const nav = $("levels");
    nav.replaceChildren();
    if (!drawing) return;
    const here = drawing.level;
    const items = [...drawing.levels];
    if (here.startsWith("domain:")) items.push(here);
    if (items.length <= 1) {
      nav.append(el("span", { class: "hint" }, "Drawn part by part: every accelerator, switch, NIC and link."));
      return;
    }
    nav.append(el("span", { class: "hint" }, "Level: "));
    for (const level of items) {
      const label = level === "aggregate" ? "all pods (tier × pod)" : level.replace("pod:", "pod ").replace("domain:", "domain ");
      const current = level === here;
      nav.append(el("button", { type: "button", class: `level${current ? " current" : ""}`, "aria-pressed": current ? "true" : "false",
        dataset: { level }, onclick: () => goTo(level === "aggregate" ? null : level) }, label));
    }
  }

  function renderLegend() {
    const box = $("legend");
    const items = [];
    const present = new Set(drawing.links.map((l) => l.network));
    for (const [net, colour] of Object.entries(NETWORK_COLOUR)) {
      if (!present.has(net)) continue;
      const sample = svg("svg", { width: 36, height: 10 }, svg("line", { x1: 0, y1: 5, x2: 36, y2: 5, stroke: colour, "stroke-width": 2.5, class: `net-${net}` }));
      items.push(el("span", { class: "legend-item" }, sample, NETWORK_NAME[net]));
    }
    const kinds = new Set(drawing.nodes.filter((n) => n.row >= 0 && !n.aggregate).map((n) => n.kind));
    for (const k of Object.keys(KIND_FILL)) {
      if (!kinds.has(k)) continue;
      items.push(el("span", { class: "legend-item" }, svg("svg", { width: 12, height: 12 }, svg("rect", { width: 12, height: 12, rx: 2, fill: KIND_FILL[k] })), KIND_NAME[k]));
    }
    const counts = Object.entries(drawing.counts).filter(([k]) => ["accelerator", "scale_up_switch", "nic", "cpu", "leaf", "spine", "core"].includes(k))
      .map(([k, v]) => `${v.toLocaleString("en")} ${KIND_NAME[k] || k}${v === 1 ? "" : "s"}`).join(" · ");
    box.replaceChildren(el("div", { class: "legend-items" }, items), el("p", { class: "hint" }, `${drawing.title}: ${counts}. ${drawing.caveat}`));
    if (estimate) {
      box.append(el("p", { class: "heat-legend" }, el("span", { class: "heat-scale" }),
        S.heat === "time"
          ? " colour: time a link is busy per step or request at its line rate, as a share of the busiest drawn link (not utilisation: fair sharing saturates every bottleneck by construction)"
          : " colour: bytes a link carries per step or request (both directions), as a share of the busiest drawn link"));
    }
  }

  function heatColour(share) {
    // light yellow → orange → dark red
    const stops = [[255, 237, 160], [254, 178, 76], [240, 59, 32], [128, 0, 38]];
    const t = Math.max(0, Math.min(1, share)) * (stops.length - 1);
    const i = Math.min(stops.length - 2, Math.floor(t));
    const f = t - i;
    const c = stops[i].map((v, k) => Math.round(v + (stops[i + 1][k] - v) * f));
    return `rgb(${c[0]},${c[1]},${c[2]})`;
  }

  function failKey(source, target) {
    return target ? `${source}~${target}` : source;
  }

  /** The selected part or link, spelled out, with the provenance of the field its rate comes from. */
  function renderSelection() {
    const box = $("selection");
    const link = drawing && drawing.links.find((l) => l.id === S.sel);
    const node = drawing && drawing.nodes.find((n) => n.id === S.sel);
    if (!link && !node) { box.hidden = true; return; }
    const lines = link ? linkLines(link) : nodeLines(node);
    const items = [el("strong", {}, lines[0]), ...lines.slice(1).map((t) => el("span", {}, t))];
    if (link && link.field && link.field !== "several fields") {
      const [ref, field] = link.field.includes(":") ? link.field.split(":", 2) : [drawing.reference, link.field];
      items.push(el("button", { type: "button", class: "small", onclick: () => showProvenance(ref, field) }, `provenance of ${link.field}`));
    }
    box.replaceChildren(...items);
    box.hidden = false;
  }

  /** Colours links by load (when a workload is laid on), marks failed parts and the selection. */
  function paint() {
    if (!drawing) return;
    renderSelection();
    const loads = new Map((estimate && estimate.level === drawing.level ? estimate.link_loads : []).map((x) => [x.id, x]));
    const failed = new Set(S.fail);
    const links = new Map(drawing.links.map((l) => [l.id, l]));
    document.querySelectorAll("#drawing line.link").forEach((line) => {
      const l = links.get(line.dataset.id);
      const load = loads.get(l.id);
      const isFailed = failed.has(failKey(l.source, l.target)) || failed.has(failKey(l.target, l.source));
      line.classList.toggle("failed", isFailed);
      line.classList.toggle("loaded", Boolean(load));
      line.classList.toggle("selected", S.sel === l.id);
      if (isFailed) {
        line.setAttribute("stroke", "#d50000");
        line.setAttribute("stroke-opacity", 1);
      } else if (estimate && loads.size) {
        line.setAttribute("stroke", load ? heatColour(load.share) : "#cfd8dc");
        line.setAttribute("stroke-opacity", load ? 0.95 : 0.5);
        line.setAttribute("stroke-width", load ? line.dataset.width : Math.min(1, line.dataset.width));
      } else {
        line.setAttribute("stroke", NETWORK_COLOUR[l.network]);
        line.setAttribute("stroke-opacity", l.network === "host" ? 0.55 : 0.75);
        line.setAttribute("stroke-width", line.dataset.width);
      }
    });
    document.querySelectorAll("#drawing g.node").forEach((g) => {
      g.classList.toggle("failed", failed.has(g.dataset.id));
      g.classList.toggle("selected", S.sel === g.dataset.id);
    });
  }

  // -- interaction ------------------------------------------------------------------------------------------------

  function goTo(open) {
    ready("no");
    S.open = open;
    S.sel = null;
    writeState();
    loadDrawing().then(runEstimate);
  }

  const tooltip = $("tooltip");
  function tip(ev, lines) {
    tooltip.replaceChildren(...lines.map((t, i) => el(i === 0 ? "strong" : "div", {}, t)));
    tooltip.hidden = false;
    const box = $("drawing").getBoundingClientRect();
    const x = ev.clientX - box.left + 14;
    const y = ev.clientY - box.top + 14;
    tooltip.style.left = `${Math.min(x, box.width - 320)}px`;
    tooltip.style.top = `${y}px`;
  }

  function linkLines(l) {
    const load = estimate && estimate.level === drawing.level ? estimate.link_loads.find((x) => x.id === l.id) : null;
    const lines = [
      `${l.source} – ${l.target}`,
      `${NETWORK_NAME[l.network]}${l.technology ? ` (${l.technology})` : ""}: ${l.shown.rate}`,
      l.shown.links,
      `field: ${l.shown.field} · status: ${l.shown.status} · confidence: ${l.confidence}`,
    ];
    if (load) lines.push(`load: ${load.shown.bytes} per ${estimate.kind === "training" ? "step" : "request"}, busy ${load.shown.busy} (${load.shown.of_communication} of the communication time)`);
    if (l.failable) lines.push(S.workload ? "click to fail this link (click again to restore)" : "choose a workload, then click to fail this link");
    return lines;
  }

  function nodeLines(n) {
    const lines = [n.label, `${KIND_NAME[n.kind] || n.kind}${n.role ? ` (${n.role.replace("_", " ")})` : ""} · ${n.id}`];
    if (n.count > 1) lines.push(`stands for ${n.count.toLocaleString("en")}`);
    if (n.opens) lines.push("click to open");
    else if (n.failable) lines.push(S.workload ? "click to fail it (click again to restore)" : "choose a workload, then click to fail it");
    return lines;
  }

  function toggleFail(key) {
    const i = S.fail.indexOf(key);
    if (i >= 0) S.fail.splice(i, 1);
    else if (S.fail.length < 8) S.fail.push(key);
  }

  const drawingBox = $("drawing");
  drawingBox.addEventListener("mousemove", (ev) => {
    if (!drawing) return;
    const line = ev.target.closest("line.link");
    const g = ev.target.closest("g.node, g.box");
    if (line) tip(ev, linkLines(drawing.links.find((l) => l.id === line.dataset.id)));
    else if (g) tip(ev, nodeLines(drawing.nodes.find((n) => n.id === g.dataset.id)));
    else tooltip.hidden = true;
  });
  drawingBox.addEventListener("mouseleave", () => { tooltip.hidden = true; });
  drawingBox.addEventListener("click", (ev) => {
    if (!drawing) return;
    const line = ev.target.closest("line.link");
    const g = ev.target.closest("g.node, g.box");
    if (g && g.dataset.opens) { goTo(g.dataset.opens); return; }
    if (line) {
      const l = drawing.links.find((x) => x.id === line.dataset.id);
      S.sel = l.id;
      if (l.failable && S.workload) { toggleFail(failKey(l.source, l.target)); writeState(); paint(); runEstimate(); return; }
    } else if (g) {
      const n = drawing.nodes.find((x) => x.id === g.dataset.id);
      S.sel = n.id;
      if (n.failable && S.workload) { toggleFail(n.id); writeState(); paint(); runEstimate(); return; }
    } else return;
    writeState();
    paint();
  });

  topologySel.addEventListener("change", () => {
    S.topology = topologySel.value;
    S.open = null; S.fail = []; S.sel = null;
    markWorkloads();
    writeState();
    loadDrawing().then(runEstimate);
  });
  workloadSel.addEventListener("change", () => {
    S.workload = workloadSel.value;
    S.knobs = {}; S.fail = []; S.phase = null;
    writeState();
    buildKnobs();
    runEstimate();
  });
  heatSel.addEventListener("change", () => {
    S.heat = heatSel.value;
    writeState();
    runEstimate();
  });

  // -- the estimate ---------------------------------------------------------------------------------------------

  /** Tests and the benchmark wait on this: "yes" once the view shows the answer to the latest request. */
  function ready(value) {
    $("results").dataset.ready = value;
  }

  async function runEstimate() {
    const seq = ++estSeq;
    ready("no");
    if (!S.workload) {
      estimate = null;
      $("results").hidden = true;
      $("whatif").hidden = true;
      if (drawing) { renderLegend(); paint(); }
      ready("yes");
      return;
    }
    busy(`Laying ${S.workload} onto ${S.topology}…`);
    const body = { topology: S.topology, workload: S.workload, knobs: knobValues(), heat: S.heat,
      fail: S.fail.map((f) => { const [source, target] = f.split("~"); return target ? { source, target } : { source }; }) };
    if (drawing && drawing.level !== "full" && drawing.level !== "aggregate") body.open = drawing.level;
    const started = performance.now();
    try {
      const data = await FR.request("/api/estimate", body);
      if (seq !== estSeq) return;
      estimate = data;
      showKnobError({ detail: [] });
      idle(`${data.workload} on ${data.topology}: ${data.shown.accelerators} accelerators · answered in ${Math.round(performance.now() - started)} ms`);
      renderResults();
      renderLegend();
      paint();
      ready("yes");
    } catch (err) {
      if (seq !== estSeq) return;
      estimate = null;
      $("results").hidden = true;
      $("whatif").hidden = true;
      idle("");
      showKnobError(err);
      renderLegend();
      paint();
      ready("yes");
    }
  }

  function renderResults() {
    const e = estimate;
    $("results").hidden = false;
    $("results-title").textContent = `${e.title}: ${e.kind === "training" ? "one training step" : "one request"} on ${e.topology}`;
    const teaching = $("teaching");
    teaching.hidden = !e.teaching;
    teaching.textContent = e.teaching ? `teaching example: ${e.teaching}` : "";
    const fitClass = e.fit.fits === true ? "fits" : e.fit.fits === false ? "no-fit" : "fit-unknown";
    $("fit").replaceChildren(el("p", { class: `fit-line ${fitClass}` }, e.fit.verdict));

    const cols = [
      { key: "phase", label: "phase" }, { key: "collective", label: "collective" }, { key: "algorithm", label: "algorithm / protocol" },
      { key: "group", label: "ranks", num: true }, { key: "tier", label: "crosses" },
      { key: "bytes", label: "bytes / rank", num: true },
      { key: "bandwidth", label: "effective bw", num: true }, { key: "overhead", label: "fixed overhead", num: true },
      { key: "transfer", label: "bytes ÷ bw", num: true }, { key: "queueing", label: "queueing", num: true },
      { key: "time", label: "time", num: true }, { key: "count", label: "count", num: true }, { key: "total", label: "total", num: true },
      { key: "dominant", label: "dominant term" }, { key: "confidence", label: "confidence" },
    ];
    const phaseTable = FR.table(`${e.workload}-on-${e.topology}-phases`, cols, e.phases.map((p) => p.shown), {
      rowClass: (row) => `phase-row${row.phase === S.phase ? " selected" : ""}`,
      onRow: (tr, row) => {
        tr.dataset.phase = row.phase;
        tr.tabIndex = 0;
        const dominantColumn = { latency: "overhead", bandwidth: "transfer", queueing: "queueing" }[row.dominant];
        const index = cols.findIndex((c) => c.key === dominantColumn);
        if (index >= 0) tr.children[index].classList.add("dominant");
        tr.addEventListener("click", () => { S.phase = S.phase === row.phase ? null : row.phase; writeState(); renderResults(); });
      },
    });
    const sum = el("p", { class: "hint" }, `communication per ${e.kind === "training" ? "step" : "request"}: ${e.shown.communication} · time = fixed overhead + bytes ÷ effective bandwidth + queueing; click a phase for its lineage and hot links · confidence ${e.confidence}`);
    $("phases").replaceChildren(phaseTable, sum);

    $("step-title").textContent = e.kind === "training" ? "Step time" : "TTFT, TPOT and serving";
    $("step").replaceChildren(FR.table(`${e.workload}-on-${e.topology}-step`,
      [{ key: "quantity", label: "quantity" }, { key: "value", label: "value", num: true }, { key: "meaning", label: "how" }],
      e.step.rows),
      ...e.step.missing.map((m) => el("p", { class: "error" }, `missing: ${m}`)),
      ...e.step.assumptions.map((a) => el("p", { class: "hint" }, `assumed: ${a.replace(/^assumed: /, "")}`)),
      e.step.calibration.length ? el("details", {}, el("summary", {}, `${e.step.calibration.length} throughput calibration numbers behind the compute time`),
        el("ul", { class: "calibration" }, e.step.calibration.map((c) => el("li", {}, c)))) : null);

    const pr = e.progress;
    $("progress").replaceChildren(
      el("p", {}, `To make progress on ${pr.what}: `, el("strong", { class: "progress-count" }, `${pr.accelerators.toLocaleString("en")} accelerators`),
        ` must communicate; they span ${pr.domains_spanned.toLocaleString("en")} scale-up domain${pr.domains_spanned === 1 ? "" : "s"} of ${pr.domain_size} (${pr.fits_in_one_domain ? "fits in one" : "does not fit in one"}).`),
      FR.table(`${e.workload}-on-${e.topology}-progress`,
        [{ key: "kind", label: "group" }, { key: "phase", label: "phase" }, { key: "size", label: "must talk", num: true },
          { key: "groups", label: "groups at once", num: true }, { key: "why", label: "on the critical path because" }],
        pr.groups.map((g) => ({ kind: g.kind, phase: g.phase, size: g.size.toLocaleString("en"), groups: g.concurrent_groups.toLocaleString("en"), why: g.why }))));

    const chosen = e.phases.filter((p) => !S.phase || p.phase === S.phase);
    const lineageRows = [];
    for (const p of chosen) {
      for (const x of p.lineage) {
        lineageRows.push({ phase: p.phase, record: `${x.reference_id}:${x.field}`, value: x.shown.value, status: x.status,
          confidence: x.confidence, source: x.source || x.note || "", ref: x.reference_id, field: x.field });
      }
    }
    for (const x of e.step.accelerator_fields) {
      lineageRows.push({ phase: "step", record: `${x.reference_id}:${x.field}`, value: x.shown.value, status: x.status,
        confidence: x.confidence, source: "", ref: x.reference_id, field: x.field });
    }
    const lineage = FR.table(`${e.workload}-on-${e.topology}-lineage`,
      [{ key: "phase", label: "for" }, { key: "record", label: "record" }, { key: "value", label: "value", num: true },
        { key: "status", label: "status" }, { key: "confidence", label: "confidence" }, { key: "source", label: "source / note" }],
      lineageRows, {
        onRow: (tr, row) => {
          tr.classList.add("clickable");
          tr.addEventListener("click", () => showProvenance(row.ref, row.field));
        },
      });
    const hot = [];
    for (const p of chosen) for (const h of p.hot_links) hot.push({ phase: p.phase, link: h.shown.link, tier: h.shown.tier, bytes: h.shown.bytes });
    $("lineage").replaceChildren(el("p", { class: "hint" }, S.phase ? `Phase ${S.phase}: ` : "All phases: ",
      "each figure is as strong as the weakest record it rests on; click a record for its provenance."), lineage,
      el("h4", {}, "Hot links"), FR.table(`${e.workload}-on-${e.topology}-hot-links`,
        [{ key: "phase", label: "phase" }, { key: "link", label: "link" }, { key: "tier", label: "tier" }, { key: "bytes", label: "bytes each way", num: true }], hot));

    const linkById = new Map(drawing ? drawing.links.map((l) => [l.id, l]) : []);
    const loadRows = [...e.link_loads].sort((a, b) => (S.heat === "time" ? b.busy_seconds - a.busy_seconds : b.bytes - a.bytes)).slice(0, 40).map((x) => {
      const l = linkById.get(x.id);
      return { link: l ? `${l.source} – ${l.target}` : x.id, network: l ? NETWORK_NAME[l.network] : "", bytes: x.shown.bytes, busy: x.shown.busy, share: x.shown.of_communication };
    });
    $("loads").replaceChildren(el("p", { class: "hint" }, `The ${Math.min(40, e.link_loads.length)} busiest of ${e.link_loads.length} loaded links in this drawing (${e.level}).`),
      FR.table(`${e.workload}-on-${e.topology}-link-loads`,
        [{ key: "link", label: "drawn link" }, { key: "network", label: "network" }, { key: "bytes", label: "bytes", num: true },
          { key: "busy", label: "busy at line rate", num: true }, { key: "share", label: "of the communication time", num: true }], loadRows));
    $("caveat").textContent = e.caveat;
    renderWhatIf();
  }

  function renderWhatIf() {
    const box = $("whatif");
    const body = $("whatif-body");
    box.hidden = !S.workload;
    const w = estimate && estimate.what_if;
    if (!w) {
      body.replaceChildren(el("p", { class: "hint" }, "Nothing failed."));
      return;
    }
    const failedList = el("ul", { class: "failed-list" }, S.fail.map((key, i) => el("li", {}, w.failed[i] || key, " ",
      el("button", { type: "button", class: "small", onclick: () => { toggleFail(key); writeState(); paint(); runEstimate(); } }, "restore"))));
    body.replaceChildren(
      failedList,
      el("p", { class: `survival ${w.route_survives ? "survives" : "lost"}` },
        w.route_survives ? "Every route of this workload survives on the remaining wiring." : `A route is lost: ${w.error || "no path"}.`),
      el("ul", { class: "lost" }, w.capacity_lost.map((c) => el("li", {}, c))),
      FR.table(`${estimate.workload}-on-${estimate.topology}-what-if`,
        [{ key: "phase", label: "phase" }, { key: "before", label: "before", num: true }, { key: "after", label: "after", num: true },
          { key: "change", label: "change", num: true }, { key: "bandwidth_before", label: "bw before", num: true }, { key: "bandwidth_after", label: "bw after", num: true }],
        w.phases.map((p) => p.shown)));
  }

  async function showProvenance(ref, field) {
    const panel = $("provenance");
    panel.hidden = false;
    panel.replaceChildren(el("h2", {}, "Provenance"), el("p", { class: "hint" }, "Loading…"));
    try {
      const url = ref === "calibration" ? `/api/calibration/${encodeURIComponent(field)}`
        : `/api/references/${encodeURIComponent(ref)}/fields/${encodeURIComponent(field)}/provenance`;
      const node = await FR.request(url);
      panel.replaceChildren(el("h2", {}, "Provenance"), FR.provenance(node));
    } catch (err) {
      panel.replaceChildren(el("h2", {}, "Provenance"), el("p", { class: "error" }, err.message));
    }
    panel.scrollIntoView({ block: "nearest" });
  }

  readState();
  markWorkloads();
  buildKnobs();
  ready("no");
  loadDrawing().then(runEstimate);
});
