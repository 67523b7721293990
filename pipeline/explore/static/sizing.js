// The sizing calculators: every input in the URL, every result from POST /api/sizing (the library's arithmetic).
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  const form = document.getElementById("sizing");
  const out = document.getElementById("sizing-results");
  const error = document.getElementById("sizing-error");
  const inputs = [...form.querySelectorAll("input, select")];
  const TITLES = { memory: "Weights and training state", kv_cache: "KV cache", fleet: "Fleet size" };
  let seq = 0;

  for (const input of inputs) {
    const v = FR.state.get(input.name);
    if (v !== null) input.value = v;
  }

  function body() {
    const b = {};
    for (const input of inputs) {
      if (input.tagName === "SELECT" && input.name !== "zero") b[input.name] = input.value;
      else if (input.value !== "") b[input.name] = Number(input.value);
    }
    return b;
  }

  async function run() {
    const mine = ++seq;
    const values = {};
    for (const input of inputs) values[input.name] = input.value;
    FR.state.set(values);
    try {
      const data = await FR.request("/api/sizing", body());
      if (mine !== seq) return;
      error.hidden = true;
      inputs.forEach((i) => i.closest("label").classList.remove("invalid"));
      out.replaceChildren(...Object.entries(data.sections).map(([key, rows]) => FR.el("section", {},
        FR.el("h2", {}, TITLES[key] || key),
        FR.table(`sizing-${key}`, [{ key: "quantity", label: "quantity" }, { key: "shown", label: "value", num: true }, { key: "formula", label: "how" }], rows))));
    } catch (err) {
      if (mine !== seq) return;
      error.textContent = err.message;
      error.hidden = false;
      for (const d of err.detail || []) {
        const name = (d.loc || [])[1];
        const input = inputs.find((i) => i.name === name);
        if (input) input.closest("label").classList.add("invalid");
      }
    }
  }

  form.addEventListener("input", run);
  form.addEventListener("submit", (ev) => { ev.preventDefault(); run(); });
  run();
});
