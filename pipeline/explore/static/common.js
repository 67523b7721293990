// Shared by every page of the explorer: building elements with text (never markup), JSON requests, tables that
// export exactly what they show (CSV or JSON), and the view's state in the URL.
"use strict";

const FR = (() => {
  /** An element with attributes and children; strings become text nodes, so nothing is ever parsed as HTML. */
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") node.className = v;
      else if (k === "dataset") Object.assign(node.dataset, v);
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }

  const SVG = "http://www.w3.org/2000/svg";
  function svg(tag, attrs, ...children) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined) continue;
      if (k === "dataset") Object.assign(node.dataset, v);
      else node.setAttribute(k, String(v));
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined) continue;
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }

  /** The detail of a 422 / 404 as {loc, msg} items (FastAPI's shape, which the server keeps for its own errors). */
  class RequestError extends Error {
    constructor(status, detail) {
      super(detail.map((d) => d.msg).join("; ") || `HTTP ${status}`);
      this.status = status;
      this.detail = detail;
    }
  }

  async function request(url, body) {
    const init = body === undefined
      ? { headers: { Accept: "application/json" } }
      : { method: "POST", headers: { "Content-Type": "application/json", Accept: "application/json" }, body: JSON.stringify(body) };
    const response = await fetch(url, init);
    const data = await response.json().catch(() => ({ detail: [{ loc: [], msg: `HTTP ${response.status}` }] }));
    if (!response.ok) {
      const detail = Array.isArray(data.detail) ? data.detail : [{ loc: [], msg: String(data.detail) }];
      throw new RequestError(response.status, detail);
    }
    return data;
  }

  /** A table from columns [{key, label, num}] and rows of shown text, with its CSV / JSON export buttons. */
  function table(name, columns, rows, options = {}) {
    const head = el("tr", {}, columns.map((c) => el("th", { class: c.num ? "num" : null }, c.label)));
    const body = el("tbody", {}, rows.map((row, i) => {
      const tr = el("tr", { class: options.rowClass ? options.rowClass(row, i) : null },
        columns.map((c) => {
          const value = row[c.key];
          const cell = el("td", { class: c.num ? "num" : null });
          if (value instanceof Node) cell.append(value);
          else cell.textContent = value === null || value === undefined ? "" : String(value);
          return cell;
        }));
      if (options.onRow) options.onRow(tr, row, i);
      return tr;
    }));
    const t = el("table", { class: "export", dataset: { name } }, el("thead", {}, head), body);
    return wrap(t);
  }

  /** The cells as shown: header texts as keys, each row's cell texts as values. */
  function shown(tableNode) {
    const keys = [...tableNode.querySelectorAll("thead th")].map((th) => th.textContent.trim());
    const rows = [...tableNode.querySelectorAll("tbody tr")].filter((tr) => !tr.hidden).map((tr) =>
      [...tr.children].map((td) => td.textContent.replace(/\s+/g, " ").trim()));
    return { keys, rows };
  }

  function csvCell(text) {
    return /[",\n\r]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
  }

  function download(filename, type, text) {
    const url = URL.createObjectURL(new Blob([text], { type }));
    const a = el("a", { href: url, download: filename });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  }

  function exportTable(tableNode, format) {
    const { keys, rows } = shown(tableNode);
    const name = tableNode.dataset.name || "table";
    if (format === "csv") {
      const text = [keys, ...rows].map((r) => r.map(csvCell).join(",")).join("\r\n") + "\r\n";
      download(`${name}.csv`, "text/csv", text);
    } else {
      const objects = rows.map((r) => Object.fromEntries(keys.map((k, i) => [k, r[i] ?? ""])));
      download(`${name}.json`, "application/json", JSON.stringify(objects, null, 2) + "\n");
    }
  }

  /** Export buttons above a table (a server-rendered one or one built here). */
  function wrap(tableNode) {
    if (tableNode.parentElement && tableNode.parentElement.classList.contains("table-wrap")) return tableNode.parentElement;
    const bar = el("div", { class: "export-bar" },
      el("button", { type: "button", class: "small", dataset: { export: "csv" }, onclick: () => exportTable(tableNode, "csv") }, "CSV"),
      el("button", { type: "button", class: "small", dataset: { export: "json" }, onclick: () => exportTable(tableNode, "json") }, "JSON"));
    const box = el("div", { class: "table-wrap" });
    if (tableNode.parentNode) tableNode.parentNode.insertBefore(box, tableNode);
    box.append(bar, tableNode);
    return box;
  }

  /** The page's state as URL parameters: read once, written on every change (reload gives the same view). */
  const state = {
    get(name) { return new URLSearchParams(location.search).get(name); },
    all(name) { return new URLSearchParams(location.search).getAll(name); },
    set(values) {
      const params = new URLSearchParams(location.search);
      for (const [k, v] of Object.entries(values)) {
        params.delete(k);
        if (Array.isArray(v)) v.forEach((x) => params.append(k, x));
        else if (v !== null && v !== undefined && v !== "") params.set(k, v);
      }
      const query = params.toString();
      history.replaceState(null, "", query ? `${location.pathname}?${query}` : location.pathname);
    },
  };

  function statusBadge(status) {
    return el("span", { class: `status status-${status}` }, status);
  }

  /** A provenance tree (GET .../provenance): each citation down to its re-verified bytes, each input of a
   *  derived field in turn. */
  function provenance(node, depth = 0) {
    const value = node.shown && node.shown.value !== undefined ? node.shown.value : String(node.value ?? "—");
    const dir = node.direction ? ` ${node.direction.replace("_", " ")}` : "";
    const box = el("div", { class: `prov depth-${Math.min(depth, 3)}`, dataset: { field: node.field } },
      el("h3", {}, el("span", { class: "id" }, node.reference_id), " · ", node.field),
      el("p", { class: "prov-value" }, el("strong", {}, value + dir), " ",
        statusBadge(node.status), " confidence ", node.confidence));
    if (node.formula) box.append(el("p", { class: "formula" }, "derived: ", el("code", {}, node.formula)));
    if (node.shown && node.shown.conflict) box.append(el("p", { class: "conflict" }, node.shown.conflict));
    if (node.shown && node.shown.check) box.append(el("p", { class: "check" }, node.shown.check));
    if (node.reason) box.append(el("p", {}, "unknown: ", node.reason));
    if (node.evidence_needed) box.append(el("p", {}, "would settle it: ", node.evidence_needed));
    if (node.why) box.append(el("p", {}, node.why));
    if (node.source_url) box.append(el("p", {}, "source: ", el("a", { href: node.source_url, rel: "noopener noreferrer" }, node.source_url)));
    for (const c of node.citations || []) {
      box.append(el("dl", { class: "citation" },
        el("dt", {}, "source"), el("dd", {}, c.url ? el("a", { href: c.url, rel: "noopener noreferrer" }, c.title || c.source_id) : (c.title || c.source_id)),
        el("dt", {}, "canonical URL"), el("dd", { class: "url" }, c.url || "none: a design statement, identified by its id and the SHA-256 of its pinned transcription"),
        el("dt", {}, "publisher"), el("dd", {}, `${c.publisher || "?"} (${c.publisher_kind || "kind not stated"})`),
        c.published_on ? [el("dt", {}, "published"), el("dd", {}, c.published_on)] : null,
        el("dt", {}, "retrieved"), el("dd", {}, c.retrieved_at.slice(0, 10)),
        el("dt", {}, "origin"), el("dd", { class: "origin" }, c.origin, c.read_via ? ` — read via a copy: ${c.read_via}` : ""),
        el("dt", {}, "SHA-256"), el("dd", {}, el("code", { class: "sha256" }, c.sha256), " ",
          el("span", { class: c.verified ? "verified" : "mismatch" }, c.verified ? "re-verified now" : `NOT VERIFIED: ${c.problem || "the stored bytes do not match"}`)),
        el("dt", {}, "locator"), el("dd", {}, el("code", {}, c.locator || "—")),
        el("dt", {}, "excerpt"), el("dd", {}, el("blockquote", {}, c.excerpt || "—")),
        c.stated ? [el("dt", {}, "stated"), el("dd", {}, c.stated)] : null));
    }
    if ((node.inputs || []).length) {
      box.append(el("p", { class: "inputs-title" }, "inputs:"));
      const list = el("div", { class: "inputs" });
      node.inputs.forEach((i) => list.append(provenance(i, depth + 1)));
      box.append(list);
    }
    return box;
  }

  document.addEventListener("DOMContentLoaded", () => {
    document.querySelectorAll("table.export").forEach((t) => wrap(t));
  });

  return { el, svg, request, RequestError, table, wrap, shown, exportTable, state, statusBadge, provenance };
})();
