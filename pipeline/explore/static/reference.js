// A reference's page: click a field to see its provenance; the selected field is kept in the URL (?field=).
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  const table = document.getElementById("fields");
  const panel = document.getElementById("provenance");
  const reference = table.dataset.reference;

  async function show(field) {
    table.querySelectorAll("tr.selected").forEach((tr) => tr.classList.remove("selected"));
    const row = table.querySelector(`tr[data-field="${CSS.escape(field)}"]`);
    if (row) row.classList.add("selected");
    panel.replaceChildren(FR.el("h2", {}, "Provenance"), FR.el("p", { class: "hint" }, "Loading…"));
    try {
      const url = `/api/references/${encodeURIComponent(reference)}/fields/${encodeURIComponent(field)}/provenance`;
      const node = await FR.request(url);
      panel.replaceChildren(FR.el("h2", {}, "Provenance"), FR.provenance(node));
    } catch (err) {
      panel.replaceChildren(FR.el("h2", {}, "Provenance"), FR.el("p", { class: "error" }, err.message));
    }
    FR.state.set({ field });
  }

  table.addEventListener("click", (ev) => {
    const row = ev.target.closest("tr[data-field]");
    if (row) show(row.dataset.field);
  });
  table.addEventListener("keydown", (ev) => {
    const row = ev.target.closest("tr[data-field]");
    if (row && (ev.key === "Enter" || ev.key === " ")) { ev.preventDefault(); show(row.dataset.field); }
  });
  const chosen = FR.state.get("field");
  if (chosen) show(chosen);
});
