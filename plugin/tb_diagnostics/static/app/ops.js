// The Operators card: every op of the span (or of the selected step) grouped by name or
// by name + input shapes, with host and device total/self time, as torch-tb-profiler's
// Operator view had it. The server sorts, filters and pages (/view?name=ops); a row
// opens the op's first call in the dispatch chain and the timeline, and shows the
// call stack most of its calls share. The Modules card narrows it to one module
// (a "tbd-ops-module" event on window).

import { PagedView } from "./pagedview.js";
import { fill, h } from "./dom.js";
import { dur, shortName, stepLabel } from "./format.js";
import { shapes } from "./roofline.js";

const PAGE = 50;
export const MODULE_EVENT = "tbd-ops-module";
const COLUMNS = [
  { key: "name", label: "Op" },
  { key: "input_dims", label: "Input shapes", shapes: true },
  { key: "calls", label: "Calls", num: true, int: true },
  { key: "host_total_us", label: "Host total µs", num: true, title: "outermost calls: a call inside a call of the same op is counted once" },
  { key: "host_self_us", label: "Host self µs", num: true },
  { key: "device_total_us", label: "Device total µs", num: true, title: "device time of everything launched under the op" },
  { key: "device_self_us", label: "Device self µs", num: true, title: "device time the op launched itself" },
  { key: "mean_us", label: "Host mean µs", num: true },
];

/** Microseconds for a table column: 3 significant digits below 100, whole µs above. */
export function us(v) {
  if (v === null || v === undefined || Number.isNaN(v)) return "—";
  const a = Math.abs(v);
  return v.toLocaleString("en-US", { maximumFractionDigits: a >= 100 ? 0 : a >= 10 ? 1 : 2 });
}

/** A select of [value, label] options. */
export function choice(label, options, onchange) {
  return h("select", { "aria-label": label, onchange: (e) => onchange(e.target.value) },
    options.map(([v, t]) => h("option", { value: v }, t)));
}

/** Run `fn` once the user has stopped typing for `ms` milliseconds. */
export function debounce(fn, wait = 250) {
  let t = null;
  return (...a) => { clearTimeout(t); t = setTimeout(() => fn(...a), wait); };
}

/** Arrow keys move the focus through a tbody's rows; Enter/Space calls `open(i)`. */
export function rowKeys(e, tbody, open) {
  const rows = [...tbody.children];
  const at = rows.indexOf(document.activeElement);
  if (at < 0) return;
  let next = null;
  if (e.key === "ArrowDown") next = rows[Math.min(at + 1, rows.length - 1)];
  else if (e.key === "ArrowUp") next = rows[Math.max(at - 1, 0)];
  else if (e.key === "Home") next = rows[0];
  else if (e.key === "End") next = rows[rows.length - 1];
  else if (e.key === "Enter" || e.key === " ") {
    e.preventDefault();
    open(at);
    return;
  }
  if (!next) return;
  e.preventDefault();
  rows.forEach((tr) => { tr.tabIndex = tr === next ? 0 : -1; });
  next.focus();
}

export class OpsView extends PagedView {
  constructor(body, tools, ctx) {
    super(body, ctx, { title: "Operators", query: { group: "name" }, pageSize: PAGE });
    this.module = null;
    this.groupSel = choice("group ops", [["name", "by name"], ["shapes", "by name + input shapes"]], (v) => this.set({ group: v }));
    this.scopeSel = choice("ops of", [["span", "whole span"], ["step", "selected step"]], (v) => { this.scope = v; this.set({}); });
    this.search = h("input", { type: "search", class: "ops-search", placeholder: "filter ops", "aria-label": "filter ops by name", oninput: debounce((e) => this.set({ q: e.target.value.trim() })) });
    tools.append(this.groupSel, this.scopeSel, this.search);
    this.note = h("div", { class: "ops-note", role: "status" });
    this.table = h("div", { class: "ops-table" });
    this.pager = h("div", { class: "ops-pager" });
    this.stack = h("div", { class: "ops-stack" });
    body.append(this.note, this.table, this.pager, this.stack);
    window.addEventListener(MODULE_EVENT, (e) => this.showModule(e.detail));
  }

  setSpan(summary) {
    this.module = null;
    super.setSpan(summary);
  }

  /** The Modules card narrows the table to one module (null: every op again). */
  showModule(m) {
    this.module = m;
    this.set({});
    if (m) this.body.closest(".card")?.scrollIntoView({ block: "nearest", behavior: "smooth" });
  }

  params() {
    const p = super.params();
    if (this.module) p.module = this.module.id;
    return p;
  }

  render(doc) {
    this.doc = doc;
    this.body.dataset.state = doc.rows.length ? "ready" : "empty";
    const cols = COLUMNS.filter((c) => !c.shapes || doc.group === "shapes");
    const where = doc.step !== null ? `step ${stepLabel(doc.step)}` : "the whole span";
    fill(this.note,
      `${doc.total_rows} op group${doc.total_rows === 1 ? "" : "s"} in ${where}`,
      ` · ${doc.totals.calls} calls · host self ${dur(doc.totals.host_self_us)} · device self ${dur(doc.totals.device_self_us)}`,
      this.scope === "step" && this.step === null ? " (no step selected: the span)" : null,
      doc.module ? h("button", { class: "ops-chip", title: "show every op again", onclick: () => this.showModule(null) },
        `under ${doc.module.path.join(" / ")} ✕`) : null,
      doc.stacks_recorded ? null : h("span", { class: "ops-hint" }, " · no call stacks: profile with with_stack=True"));
    if (!doc.rows.length) {
      fill(this.table, h("div", { class: "none" }, this.q.q ? `No op matches “${this.q.q}”.` : "No operator calls here."));
      fill(this.pager);
      fill(this.stack);
      return;
    }
    const [desc, key] = doc.sort.startsWith("-") ? [true, doc.sort.slice(1)] : [false, doc.sort];
    const head = h("tr", null, cols.map((c) => h("th", {
      class: c.num ? "num" : "", scope: "col", title: c.title || null,
      "aria-sort": c.key === key ? (desc ? "descending" : "ascending") : null,
    }, c.shapes ? c.label : h("button", { onclick: () => this.sortBy(c.key, key, desc), title: `sort by ${c.label}` }, c.label))));
    this.tbody = h("tbody", { onkeydown: (e) => rowKeys(e, this.tbody, (i) => this.open(i)) },
      doc.rows.map((r, i) => h("tr", { tabindex: i ? -1 : 0, "aria-selected": "false", onclick: () => this.open(i), title: `${r.name}\nclick or Enter: open its first call` },
        cols.map((c) => h("td", { class: c.num ? "num" : c.shapes ? "ops-shapes" : "ops-name" }, this.cell(r, c))))));
    fill(this.table, h("table", { class: "data ops", "aria-label": "operators" }, h("thead", null, head), this.tbody));
    this.renderPager(doc);
    fill(this.stack);
  }

  cell(r, c) {
    const v = r[c.key];
    if (c.key === "name") return shortName(v, 60);
    if (c.shapes) return shapes(v, 60) || "—";
    if (c.int) return String(v);
    return us(v);
  }

  sortBy(col, key, desc) {
    // A new column starts descending (the biggest first); the same one flips.
    const down = col === key ? !desc : col !== "name";
    this.set({ sort: `${down ? "-" : ""}${col}` });
  }

  renderPager(doc) {
    const last = doc.offset + doc.rows.length;
    const go = (off) => { this.q = { ...this.q, offset: off }; this.load(); };
    fill(this.pager, doc.total_rows > PAGE ? [
      h("button", { disabled: doc.offset === 0, onclick: () => go(Math.max(doc.offset - PAGE, 0)) }, "‹ previous"),
      ` ${doc.offset + 1}–${last} of ${doc.total_rows} `,
      h("button", { disabled: last >= doc.total_rows, onclick: () => go(last) }, "next ›")] : []);
  }

  open(i) {
    const r = this.doc.rows[i];
    [...this.tbody.children].forEach((tr, k) => tr.setAttribute("aria-selected", k === i ? "true" : "false"));
    this.renderStack(r);
    if (r.rows?.length) this.ctx.openOp({ ...r, rows: r.rows, steps: r.steps });
  }

  renderStack(r) {
    if (!r.stack) {
      fill(this.stack, this.doc.stacks_recorded ? h("div", { class: "none" }, `${r.name}: no call stack recorded for its calls.`) : null);
      return;
    }
    const share = r.stacks > 1 ? `${r.stack_calls} of ${r.calls} calls; ${r.stacks} distinct stacks` : `all ${r.stack_calls} calls`;
    fill(this.stack, h("h3", { class: "rf-caption" }, `Call stack of ${shortName(r.name, 60)} (${share})`),
      h("ol", { class: "ops-frames", "aria-label": "call stack, innermost first" }, r.stack.map((f) => h("li", null, f))));
  }
}
