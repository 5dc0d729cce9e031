// The Modules card: the nn.Module tree of the span (or of the selected step), from the
// `nn.Module: Name_N` frames that with_stack / with_modules record: calls, host time
// (the frames' duration) and the device time of what was launched inside. The server
// bounds the tree (/view?name=modules); a row opens the Operators card narrowed to the
// ops under that module.

import { PagedView } from "./pagedview.js";
import { fill, h } from "./dom.js";
import { stepLabel } from "./format.js";
import { MODULE_EVENT, choice, debounce, rowKeys, us } from "./ops.js";

const PAGE = 200;
const COLUMNS = [
  { key: "name", label: "Module" },
  { key: "calls", label: "Calls", num: true, int: true },
  { key: "host_us", label: "Host µs", num: true, title: "the module's frames: their duration" },
  { key: "host_self_us", label: "Host self µs", num: true, title: "minus the sub-modules' frames" },
  { key: "device_us", label: "Device µs", num: true, title: "device time launched inside the module's frames" },
  { key: "device_self_us", label: "Device self µs", num: true },
  { key: "host_mean_us", label: "Host mean µs", num: true },
];

export class ModulesView extends PagedView {
  constructor(body, tools, ctx) {
    super(body, ctx, { title: "Modules", pageSize: PAGE });
    this.scopeSel = choice("modules of", [["span", "whole span"], ["step", "selected step"]], (v) => { this.scope = v; this.set({}); });
    this.search = h("input", { type: "search", class: "ops-search", placeholder: "filter modules", "aria-label": "filter modules by name", oninput: debounce((e) => this.set({ q: e.target.value.trim() })) });
    tools.append(this.scopeSel, this.search);
    this.note = h("div", { class: "ops-note", role: "status" });
    this.table = h("div", { class: "ops-table mod-table" });
    this.pager = h("div", { class: "ops-pager" });
    body.append(this.note, this.table, this.pager);
  }

  render(doc) {
    this.doc = doc;
    if (!doc.modules_recorded) {
      this.body.dataset.state = "empty";
      fill(this.note);
      fill(this.pager);
      fill(this.table, h("div", { class: "none", id: "modules-empty" },
        h("strong", null, "No nn.Module frames in this trace."),
        " Profile with torch.profiler.profile(with_stack=True) (or with_modules=True) to see the module tree, its host time and the device time each module launches."));
      return;
    }
    this.body.dataset.state = doc.rows.length ? "ready" : "empty";
    const where = doc.step !== null ? `step ${stepLabel(doc.step)}` : "the whole span";
    fill(this.note, `${doc.nodes} module${doc.nodes === 1 ? "" : "s"} in ${where}`,
      doc.omitted ? ` · ${doc.omitted} below the depth (${doc.max_depth}) and children (${doc.max_children}) caps not shown` : "",
      this.q.q ? " · matching modules, flat" : " · a row opens its ops");
    if (!doc.rows.length) {
      fill(this.table, h("div", { class: "none" }, this.q.q ? `No module matches “${this.q.q}”.` : "No module ran here."));
      fill(this.pager);
      return;
    }
    const [desc, key] = doc.sort.startsWith("-") ? [true, doc.sort.slice(1)] : [false, doc.sort];
    const head = h("tr", null, COLUMNS.map((c) => h("th", {
      class: c.num ? "num" : "", scope: "col", title: c.title || null,
      "aria-sort": c.key === key ? (desc ? "descending" : "ascending") : null,
    }, h("button", { onclick: () => this.sortBy(c.key, key, desc), title: `sort by ${c.label}` }, c.label))));
    const flat = Boolean(this.q.q);
    this.tbody = h("tbody", { onkeydown: (e) => rowKeys(e, this.tbody, (i) => this.open(i)) },
      doc.rows.map((r, i) => h("tr", { tabindex: i ? -1 : 0, "aria-selected": "false", "aria-level": flat ? null : r.depth + 1, onclick: () => this.open(i), title: `${r.path}\nclick or Enter: its ops in Operators` },
        COLUMNS.map((c) => h("td", c.key === "name" ? { class: "mod-name", style: { paddingLeft: `${6 + (flat ? 0 : r.depth) * 14}px` } } : { class: "num" }, this.cell(r, c, flat))))));
    fill(this.table, h("table", { class: "data ops mods", "aria-label": "modules" }, h("thead", null, head), this.tbody));
    const last = doc.offset + doc.rows.length;
    const go = (off) => { this.q = { ...this.q, offset: off }; this.load(); };
    fill(this.pager, doc.total_rows > PAGE ? [
      h("button", { disabled: doc.offset === 0, onclick: () => go(Math.max(doc.offset - PAGE, 0)) }, "‹ previous"),
      ` ${doc.offset + 1}–${last} of ${doc.total_rows} `,
      h("button", { disabled: last >= doc.total_rows, onclick: () => go(last) }, "next ›")] : []);
  }

  cell(r, c, flat) {
    const v = r[c.key];
    if (c.key === "name") {
      return [flat ? r.path : v, r.children_omitted ? h("span", { class: "ops-hint" }, ` +${r.children_omitted} more`) : null];
    }
    if (c.int) return String(v);
    return us(v);
  }

  sortBy(col, key, desc) {
    const down = col === key ? !desc : col !== "name";
    this.set({ sort: `${down ? "-" : ""}${col}` });
  }

  /** Operators, narrowed to the ops under this module. */
  open(i) {
    const r = this.doc.rows[i];
    [...this.tbody.children].forEach((tr, k) => tr.setAttribute("aria-selected", k === i ? "true" : "false"));
    window.dispatchEvent(new CustomEvent(MODULE_EVENT, { detail: { id: r.id, path: r.path } }));
  }
}
