// The Memory card: per device, allocated and reserved memory over the span (or the
// selected step) from the [memory] events, the peak, the allocations alive there by
// the op that made them, and what each step left allocated. The server builds the
// view (`/view?name=memory`): a bounded curve (min/max per bucket, so the peak stays)
// and paged rows; this card draws it (memchart.js) and links steps to the rest.

import { h } from "./dom.js";
import { bytes, pct, shortName, stepLabel } from "./format.js";
import { MemoryChart } from "./memchart.js";

const ROWS = 50;
const COLUMNS = [
  { key: "op", label: "Op", title: "the outermost op around the allocation on its thread" },
  { key: "bytes", label: "Bytes", num: true },
  { key: "count", label: "Allocations", num: true },
  { key: "largest_bytes", label: "Largest", num: true },
  { key: "stack", label: "Call path (largest)", title: "host events around the largest allocation, outermost first" },
];

const b = (x) => (x === null || x === undefined ? "—" : bytes(x));
/** The innermost end of a call path (outermost first): where the allocation was made. */
const tail = (s, max) => (s && s.length > max ? `…${s.slice(s.length - max + 1)}` : s || "");

export class MemoryView {
  constructor(body, tools, ctx) {
    this.body = body;
    this.tools = tools;
    this.ctx = ctx;
    this.sort = "-bytes";
    this.mode = "span"; // or "step": the chart and the table of the selected step
    this.step = undefined;
    this.device = null;
    this.doc = null;
    this.token = 0;
    this.chartEl = h("div", { id: "memory-chart" });
    this.wrap = h("div", {
      class: "mem-chart", tabindex: 0, role: "group",
      "aria-label": "memory chart: left and right arrows go through the steps, Home to the peak's step, Enter opens the step",
      onkeydown: (e) => this.key(e),
    }, this.chartEl);
    this.chart = new MemoryChart(this.chartEl, { onPick: (us) => this.pickTime(us) });
  }

  setSpan() {
    this.device = null;
    this.mode = "span";
    this.load();
  }

  selectStep(st) {
    this.step = st?.step;
    if (this.mode === "step") this.load();
    else this.chart.select(this.step);
  }

  build() {
    this.chart.build();
  }

  async load() {
    const token = ++this.token;
    const params = { sort: this.sort, limit: ROWS };
    if (this.mode === "step" && this.step !== undefined && this.step !== null) params.step = this.step;
    if (this.device) params.device = this.device;
    this.body.setAttribute("aria-busy", "true");
    try {
      const doc = await this.ctx.fetch(params);
      if (token !== this.token) return;
      this.doc = doc;
      // The table is one device's: with several, ask again for the one the card shows.
      if (!params.device && doc.available && doc.devices.length > 1) {
        this.device = this.current().device;
        this.load();
        return;
      }
      this.render();
    } catch (e) {
      if (token !== this.token || e?.name === "AbortError") return;
      this.body.replaceChildren(h("div", { class: "none", id: "memory-error" }, `Memory view: ${e.message || e}`));
    } finally {
      if (token === this.token) this.body.removeAttribute("aria-busy");
    }
  }

  current() {
    const devs = this.doc?.devices || [];
    return devs.find((d) => d.device === this.device)
      || devs.find((d) => d.device_type !== 0 && d.events) || devs[0] || null;
  }

  render() {
    const doc = this.doc;
    this.body.dataset.state = doc.available ? "ok" : "empty";
    if (!doc.available) {
      this.tools.replaceChildren();
      this.chart.setData(null);
      this.body.replaceChildren(h("div", { class: "none mem-empty", id: "memory-empty" },
        h("strong", null, "No memory events in this trace."), " The profiler records allocations only when asked: ",
        h("code", null, "torch.profiler.profile(..., profile_memory=True)"),
        "; with ", h("code", null, "with_stack=True"), " the Python lines that made them are named too."));
      return;
    }
    const dev = this.current();
    this.device = dev?.device ?? null;
    this.renderTools(doc, dev);
    // Shaded: the steps of a finding that says something is wrong (not the "no growth" info).
    const marked = doc.findings.filter((f) => f.device === dev.device && f.severity !== "info").flatMap((f) => f.steps);
    const reserved = dev.peak_reserved_bytes !== null;
    this.body.replaceChildren(this.summaryLine(dev), this.findingNotes(doc, dev), this.legend(marked.length > 0, reserved),
      this.wrap, this.aliveTable(doc, dev), this.stepTable(dev));
    this.chart.setData(dev, doc.steps, marked, this.step);
  }

  renderTools(doc, dev) {
    const devSel = doc.devices.length > 1 ? h("label", null, "Device ", h("select", {
      id: "memory-device", onchange: (e) => { this.device = e.target.value; this.load(); },
    }, doc.devices.map((d) => h("option", { value: d.device, selected: d.device === dev.device }, d.device)))) : null;
    const mode = h("label", null, "Show ", h("select", {
      id: "memory-mode", onchange: (e) => { this.mode = e.target.value; this.load(); },
    }, h("option", { value: "span", selected: this.mode === "span" }, "whole span"),
    h("option", { value: "step", selected: this.mode === "step" }, "selected step")));
    this.tools.replaceChildren(h("span", { class: "mem-tools" }, devSel, mode));
  }

  summaryLine(d) {
    const frac = d.total_bytes ? d.peak_reserved_bytes / d.total_bytes : null;
    const shown = frac === null ? "" : frac < 0.001 ? "<0.1%" : frac < 0.1 ? `${(frac * 100).toFixed(1)}%` : pct(frac);
    const share = d.total_bytes && d.peak_reserved_bytes !== null ? ` (${shown} of ${bytes(d.total_bytes)})` : "";
    const at = d.peak_at_us === null ? "" : ` at ${(d.peak_at_us / 1000).toFixed(1)} ms${d.peak_step !== null ? ` (step ${d.peak_step})` : ""}`;
    const before = d.alive_at_peak?.before_trace_bytes;
    return h("div", { class: "mem-summary", id: "memory-summary" },
      h("strong", null, d.device), ` · peak allocated ${b(d.peak_allocated_bytes)}${at}`,
      d.peak_reserved_bytes === null ? "" : ` · peak reserved ${bytes(d.peak_reserved_bytes)}${share}`,
      ` · ${d.events.toLocaleString()} events${d.curve.points < d.curve.of_events ? ` (${d.curve.points.toLocaleString()} drawn)` : ""}`,
      d.relative ? " · relative to the start of profiling (no allocator totals in this trace)" : "",
      before ? h("span", { class: "muted", title: "alive at the peak but allocated before the first event: weights, optimizer state, caches" }, ` · ${bytes(before)} allocated before the trace`) : "");
  }

  findingNotes(doc, d) {
    const fs = doc.findings.filter((f) => f.device === d.device && f.severity !== "info");
    return h("div", { class: "mem-findings", id: "memory-findings", hidden: !fs.length },
      fs.map((f) => h("div", { class: `rf-note mem-finding ${f.severity}`, title: f.message },
        h("span", { class: "mem-rule" }, f.rule), " ", f.message.length > 280 ? `${f.message.slice(0, 279)}…` : f.message,
        f.steps.some((s) => s !== null) ? h("span", { class: "muted" }, " (shaded on the chart)") : null)));
  }

  legend(shaded, reserved) {
    const key = (cls, label) => h("span", null, h("i", { class: `mem-key ${cls}` }), label);
    return h("div", { class: "legend mem-legend" }, key("alloc", "allocated"), reserved ? key("reserved", "reserved") : null,
      key("peak", "peak"), key("step", "step boundary"), shaded ? key("finding", "a memory finding's steps") : null);
  }

  aliveTable(doc, d) {
    const alive = d.alive_at_peak;
    if (alive && !alive.matched) return h("div", { class: "mem-alive" }, h("div", { class: "rf-note", id: "memory-unmatched" }, alive.note));
    const caption = !alive ? "No allocation events on this device"
      : `Alive at the peak: ${bytes(alive.bytes)} in ${alive.count.toLocaleString()} allocations, by the op that made them`;
    const head = h("tr", null, COLUMNS.map((c) => {
      const on = this.sort.replace(/^-/, "") === c.key;
      return h("th", { class: c.num ? "num" : "", scope: "col", title: c.title || null,
        "aria-sort": on ? (this.sort.startsWith("-") ? "descending" : "ascending") : null,
      }, h("button", { onclick: () => this.toggleSort(c.key, c.num), title: `sort by ${c.label}` }, c.label));
    }));
    this.rows = doc.rows;
    this.tbody = h("tbody", { onkeydown: (e) => this.tableKey(e, this.tbody, () => this.ctx.openStep(d.peak_step)) },
      doc.rows.map((r, i) => h("tr", {
        tabindex: i ? -1 : 0, title: [r.op, r.stack, r.call_stack].filter(Boolean).join("\n"),
        onclick: () => this.ctx.openStep(d.peak_step),
      }, h("td", { class: "mem-op" }, shortName(r.op, 60)), h("td", { class: "num" }, bytes(r.bytes)),
      h("td", { class: "num" }, r.count.toLocaleString()), h("td", { class: "num" }, bytes(r.largest_bytes)),
      // Right-aligned overflow: the cell cuts the outer frames, the innermost stay in view.
      h("td", { class: "mem-stack" }, h("span", { dir: "ltr" }, tail(r.stack, 240))))));
    const more = doc.total_rows > doc.rows.length ? h("div", { class: "rf-note" }, `the ${doc.rows.length} first of ${doc.total_rows} ops (tb-diagnostics memory --limit for more).`) : null;
    return h("div", { class: "mem-alive" }, h("h3", { class: "rf-caption" }, caption),
      h("table", { class: "data mem-table fixed", id: "memory-alive", "aria-label": "allocations alive at the peak, by op" },
        h("colgroup", null, ["25%", "10%", "14%", "10%", "41%"].map((w) => h("col", { style: { width: w } }))),
        h("thead", null, head), this.tbody), more);
  }

  stepTable(d) {
    const steps = d.per_step;
    if (!steps.length) return null;
    const tbody = h("tbody", null, steps.map((s, i) => h("tr", {
      tabindex: i ? -1 : 0, onclick: () => this.ctx.openStep(s.step),
      title: s.kept_by_op.map((o) => `${o.op}: ${bytes(o.bytes)} (${o.count})`).join("\n") || "nothing made in the step is still allocated at its end",
    }, h("td", null, h("strong", null, stepLabel(s.step))), h("td", { class: "num" }, b(s.start_allocated_bytes)),
    h("td", { class: "num" }, b(s.end_allocated_bytes)), h("td", { class: "num" }, b(s.peak_allocated_bytes)),
    h("td", { class: "num" }, s.kept_count === null ? "—" : s.kept_count ? `${bytes(s.kept_bytes)} (${s.kept_count})` : "nothing"),
    h("td", { class: "mem-op" }, s.kept_by_op.length ? shortName(s.kept_by_op[0].op, 50) : ""))));
    tbody.addEventListener("keydown", (e) => this.tableKey(e, tbody, (i) => this.ctx.openStep(steps[i].step)));
    const cols = ["Step", "Start", "End", "Peak", "Kept at its end", "Mostly by"];
    return h("div", { class: "mem-steps" }, h("h3", { class: "rf-caption" }, "Per step: allocated, and what it left allocated"),
      h("table", { class: "data mem-table", id: "memory-steps", "aria-label": "memory per step" },
        h("thead", null, h("tr", null, cols.map((c, i) => h("th", { scope: "col", class: i && i < 5 ? "num" : "" }, c)))), tbody));
  }

  toggleSort(key, num) {
    const cur = this.sort.replace(/^-/, "");
    this.sort = cur === key ? (this.sort.startsWith("-") ? key : `-${key}`) : (num ? `-${key}` : key);
    this.load();
  }

  /** ↑/↓ move through a table's rows, Enter opens (onEnter(row index)). */
  tableKey(e, tbody, onEnter) {
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
      onEnter(at);
      return;
    }
    if (!next) return;
    e.preventDefault();
    rows.forEach((tr) => { tr.tabIndex = tr === next ? 0 : -1; });
    next.focus();
  }

  /** The chart's keys: ←/→ through the steps (the card's own cursor), Home: the peak's
   * step, Enter: open the step in the rest of the tab. */
  key(e) {
    const steps = this.doc?.steps || [];
    if (e.target !== this.wrap || !steps.length) return;
    const at = steps.findIndex((s) => s.step === this.step);
    let next = null;
    if (e.key === "ArrowRight") next = steps[Math.min(at + 1, steps.length - 1)];
    else if (e.key === "ArrowLeft") next = steps[Math.max(at - 1, 0)];
    else if (e.key === "Home") next = steps.find((s) => s.step === this.current()?.peak_step) || steps[0];
    else if (e.key === "Enter" || e.key === " ") {
      e.preventDefault();
      if (at >= 0) this.ctx.openStep(steps[at].step);
      return;
    } else return;
    e.preventDefault();
    this.step = next.step;
    this.chart.select(this.step);
  }

  pickTime(us) {
    const s = (this.doc?.steps || []).find((x) => us >= x.start_us && us < x.end_us);
    if (s) this.ctx.openStep(s.step);
  }
}
