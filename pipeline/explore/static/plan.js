// The plan page: the search's inputs in the URL, its results from POST /api/plan (the planner, run in memory),
// a table sortable by any column, the Pareto front, and "open this layout" on the model view.
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  const el = FR.el;
  const form = document.getElementById("plan");
  const status = document.getElementById("plan-status");
  const error = document.getElementById("plan-error");
  const results = document.getElementById("plan-results");
  const inputs = [...form.querySelectorAll("input, select")];
  const model = document.getElementById("plan-model");
  const cluster = document.getElementById("plan-cluster");
  let seq = 0;
  let data = null;
  let sort = { key: "rank", dir: 1 };

  // Each column: what it shows, and the value it sorts by.
  const COLUMNS = [
    { key: "rank", label: "rank", num: true, value: (r) => r.rank, show: (r) => String(r.rank) },
    { key: "layout", label: "layout", value: (r) => r.layout_id, show: (r) => el("span", { title: r.layout_id }, r.describe) },
    { key: "fit", label: "fit", value: (r) => r.shown.fit, show: (r) => r.shown.fit },
    { key: "step", label: "step", num: true, value: (r) => r.step_seconds, show: (r) => r.shown.step },
    { key: "routed", label: "routed step", num: true, value: (r) => r.routed_step_seconds ?? Infinity, show: (r) => r.shown.routed_step },
    { key: "exposed", label: "exposed comm", num: true, value: (r) => r.exposed_communication_seconds ?? Infinity, show: (r) => r.shown.exposed_communication },
    { key: "memory", label: "memory/rank", num: true, value: (r) => r.memory_per_rank_bytes, show: (r) => r.shown.memory_per_rank },
    { key: "headroom", label: "headroom", num: true, value: (r) => r.headroom_bytes, show: (r) => r.shown.headroom },
    { key: "dominant", label: "dominant cost", value: (r) => r.dominant || "", show: (r) => r.dominant || "—" },
    { key: "must_talk", label: "must talk", num: true, value: (r) => r.must_talk, show: (r) => r.must_talk.toLocaleString("en-US") },
    { key: "confidence", label: "confidence", value: (r) => r.confidence || "", show: (r) => r.confidence || "—" },
    { key: "costing", label: "costing", value: (r) => r.costing || "", show: (r) => r.costing || "—" },
    { key: "pareto", label: "Pareto", value: (r) => (r.pareto ? 0 : 1), show: (r) => (r.pareto ? "on the front" : "") },
    { key: "open", label: "open", value: (r) => (r.open_url ? 0 : 1), show: (r) => (r.open_url
      ? el("a", { href: r.open_url, class: "open-layout", title: r.open_note }, "open this layout")
      : el("span", { title: r.open_note }, "—")) },
  ];

  for (const input of inputs) {
    const v = FR.state.get(input.name);
    if (v !== null && (input.tagName !== "SELECT" || [...input.options].some((o) => o.value === v))) input.value = v;
  }
  if (FR.state.get("cluster") === null) {
    const targets = (model.selectedOptions[0]?.dataset.targets || "").split(" ");
    if (targets[0] && [...cluster.options].some((o) => o.value === targets[0])) cluster.value = targets[0];
  }
  const wanted = FR.state.get("sort");
  if (wanted) {
    const [key, dir] = wanted.split(":");
    if (COLUMNS.some((c) => c.key === key)) sort = { key, dir: dir === "desc" ? -1 : 1 };
  }

  function body() {
    const b = {};
    for (const input of inputs) {
      if (input.tagName === "SELECT") b[input.name] = input.value;
      else if (input.value !== "") b[input.name] = Number(input.value);
    }
    return b;
  }

  function sorted(rows) {
    const col = COLUMNS.find((c) => c.key === sort.key) || COLUMNS[0];
    return [...rows].sort((a, b) => {
      const x = col.value(a), y = col.value(b);
      const c = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
      return (c || a.rank - b.rank) * sort.dir;
    });
  }

  function table(name, rows, sortable) {
    const columns = COLUMNS.map((c) => ({ key: c.key, label: sortable && c.key === sort.key ? `${c.label} ${sort.dir > 0 ? "▲" : "▼"}` : c.label, num: c.num }));
    const shown = (sortable ? sorted(rows) : rows).map((r) => Object.fromEntries(COLUMNS.map((c) => [c.key, c.show(r)])));
    const box = FR.table(name, columns, shown, { onRow: (tr, row, i) => { tr.dataset.layout = (sortable ? sorted(rows) : rows)[i].layout_id; } });
    if (sortable) {
      box.querySelectorAll("thead th").forEach((th, i) => {
        th.classList.add("sortable");
        th.dataset.sort = COLUMNS[i].key;
        th.addEventListener("click", () => {
          const key = COLUMNS[i].key;
          sort = { key, dir: sort.key === key ? -sort.dir : 1 };
          FR.state.set({ sort: sort.key === "rank" && sort.dir > 0 ? null : `${sort.key}:${sort.dir > 0 ? "asc" : "desc"}` });
          render();
        });
      });
    }
    return box;
  }

  function render() {
    if (!data) return;
    document.getElementById("plan-table").replaceChildren(table("plan-layouts", data.layouts, true));
    document.getElementById("plan-pareto").replaceChildren(table("plan-pareto", data.pareto, false));
    const notes = [...data.rejections.map((r) => `not searched: ${r}`), ...data.notes];
    document.getElementById("plan-notes").replaceChildren(el("ul", { class: "notes" }, notes.map((n) => el("li", {}, n))));
    const c = data.counts;
    status.textContent = `${c.legal.toLocaleString("en-US")} legal layouts: ${c.not_fitting.toLocaleString("en-US")} do not fit, `
      + `${c.pruned.toLocaleString("en-US")} pruned as dominated, ${c.evaluated.toLocaleString("en-US")} evaluated (plan ${data.plan_id}).`;
    results.hidden = false;
  }

  async function run() {
    const mine = ++seq;
    const values = {};
    for (const input of inputs) values[input.name] = input.value;
    FR.state.set(values);
    status.textContent = "searching…";
    error.hidden = true;
    try {
      const answer = await FR.request("/api/plan", body());
      if (mine !== seq) return;
      data = answer;
      render();
    } catch (err) {
      if (mine !== seq) return;
      data = null;
      results.hidden = true;
      status.textContent = "";
      error.textContent = err.message;
      error.hidden = false;
    }
  }

  form.addEventListener("submit", (ev) => { ev.preventDefault(); run(); });
  model.addEventListener("change", () => {
    const targets = (model.selectedOptions[0]?.dataset.targets || "").split(" ");
    if (targets[0] && [...cluster.options].some((o) => o.value === targets[0])) cluster.value = targets[0];
  });
  if (FR.state.get("model") !== null) run();  // a shared link reruns its search; a fresh page waits for Search
});
