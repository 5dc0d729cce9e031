// The roofline card: where each op group of the span sits against the
// device's ceilings (the chart, rfchart.js), the ops that lose the most time
// against their roof (a table), and why something is missing (no shapes, no
// peaks, device time without a cost model). A point or a row opens the op's
// first call: its step, the call in the timeline and in the dispatch chain.

import { h } from "./dom.js";
import { dur, ms, pct, shortName, stepLabel } from "./format.js";
import { RooflineChart, plottable, siFlops } from "./rfchart.js";

const TOP_OPS = 8;
const BOUND_LABEL = { compute: "compute", memory: "memory", "host-link": "host link" };
/** A fraction as a percentage, one decimal under 10%: "0.3%", "23%". */
const pct1 = (x) => {
  if (x === null || x === undefined) return "—";
  if (x < 0.001) return "<0.1%";
  return x < 0.1 ? `${(x * 100).toFixed(1)}%` : pct(x);
};

/** "16×5185×64, 16×64×5185": the tensor inputs' shapes (scalars dropped), cut at `max`. */
export function shapes(dims, max = 60) {
  const one = (d) => {
    if (!Array.isArray(d)) return String(d);
    if (!d.length) return "";
    if (Array.isArray(d[0])) return `[${d.map(one).filter(Boolean).join(", ")}]`;
    return d.join("×");
  };
  const s = (dims || []).map(one).filter(Boolean).join(", ");
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

const noPeaks = (peaks) => !peaks || Object.values(peaks).every((v) => v === null || v === undefined);

export class RooflineView {
  constructor(container, tools, { onOpen }) {
    this.container = container;
    this.tools = tools;
    this.onOpen = onOpen;
    this.notes = h("div", { class: "rf-notes" });
    this.chartEl = h("div", { id: "roofline-chart" });
    this.tip = h("div", { class: "tl-tip rf-tip", hidden: true, role: "status", "aria-live": "polite" });
    this.wrap = h("div", {
      class: "rf-chart", tabindex: 0, role: "group",
      "aria-label": "roofline chart: arrow keys go through the ops by device time, Enter opens one",
      onkeydown: (e) => this.key(e), onblur: () => this.chart.setActive(null),
    }, this.chartEl, this.tip);
    this.side = h("div", { class: "rf-side" });
    this.main = h("div", { class: "rf-main" }, this.wrap, this.side);
    this.chart = new RooflineChart(this.chartEl, {
      onHover: (op, at) => this.showTip(op, at),
      onClick: (op) => this.open(op),
    });
  }

  setData(summary) {
    this.summary = summary;
    this.opened = null;
    this.ops = null;
    const r = summary.roofline;
    const state = this.state(summary);
    this.container.dataset.state = state;
    this.renderTools(r, state);
    if (["none", "cpu", "no-shapes", "no-ops"].includes(state)) {
      this.chart.setData(null);
      this.container.replaceChildren(this.emptyState(state, summary));
      return;
    }
    this.ops = [...r.ops].filter(plottable).sort((a, b) => b.device_us - a.device_us);
    this.container.replaceChildren(this.notes, this.main);
    this.renderNotes(r, state);
    this.renderTable(r);
    this.chart.setData(this.ops, noPeaks(r.device?.peaks) ? null : r.device.peaks);
  }

  state(s) {
    const r = s.roofline;
    if (!r) return "none";
    // A CPU-only trace has a roofline only when the CPU's peaks were given.
    if (s.device?.kind === "cpu" && noPeaks(r.device?.peaks)) return "cpu";
    if (!r.shapes_recorded) return "no-shapes";
    if (!(r.ops || []).some(plottable)) return "no-ops";
    return noPeaks(r.device?.peaks) ? "no-peaks" : "ok";
  }

  /** Rebuild the chart (its colours are read once: a theme change). */
  build() {
    if (this.ops && this.container.contains(this.main)) this.chart.build();
  }

  /** An op opened elsewhere (the Operators card): its bubble selected, when the chart has
   * its group (same name; same input shapes where the row gives them). */
  showOp(op) {
    const dims = op.input_dims ? JSON.stringify(op.input_dims) : null;
    const hit = (this.ops || []).find((o) => o.name === op.name && (!dims || JSON.stringify(o.input_dims) === dims));
    this.chart.select(hit || null);
    return Boolean(hit);
  }

  deviceName(r) {
    return r?.device?.name || this.summary.device?.name || "this device";
  }

  renderTools(r, state) {
    const dot = (cls, label) => h("span", null, h("i", { class: `rf-dot ${cls}` }), label);
    const dev = r?.device?.name ? h("span", { class: "rf-device", title: r.device.source ? `peaks: ${r.device.source}` : "" },
      r.device.name, this.identifiedBy(r.device)) : null;
    const plotted = state === "ok" || state === "no-peaks";
    this.tools.replaceChildren(...[plotted ? h("span", { class: "legend", style: { padding: 0 }, title: "one bubble per op group (name, shapes, types); its area: device time" },
      state === "ok" ? [dot("compute", "compute-bound"), dot("memory", "memory-bound")] : null,
      dot("nobound", state === "ok" ? "no bound" : "no peaks: no bound"), h("span", null, "area ∝ device time")) : null, dev].filter(Boolean));
  }

  /** How the peaks' row was chosen when not by the device's name: the trace's name was
   * ambiguous or unknown, so the figures rest on its properties (or are an estimate). */
  identifiedBy(d) {
    const label = { properties: "identified by its properties", estimate: "estimated" }[d.identified_by];
    return label ? h("span", { class: `rf-ident ${d.identified_by}`, id: "roofline-identified", title: d.identification || label }, ` (${label})`) : null;
  }

  emptyState(state, s) {
    const r = s.roofline;
    const text = {
      none: ["No roofline in this summary.", "This tb-diagnostics build does not model op costs."],
      cpu: ["CPU-only trace: the CPU has no peak figures, so there is no roofline to place its ops against.",
        "Give them with TB_DIAGNOSTICS_PEAKS (a \"cpu\" entry, see docs/peaks.md), or profile with ProfilerActivity.CUDA and record_shapes=True to see each op against the GPU's ceilings."],
      "no-shapes": ["record_shapes was off: no FLOPs — profile with record_shapes=True.",
        "Without the input shapes no op's FLOPs or bytes can be counted."],
      "no-ops": ["No op here has a FLOP count to plot.", "The device time below has no cost model."],
    }[state];
    return h("div", { class: "none rf-empty", id: "roofline-empty" },
      h("strong", null, text[0]), " ", text[1],
      r ? this.unmodelledNote(r) : null,
      state === "no-shapes" && noPeaks(r.device?.peaks) ? h("div", null, this.peaksHint(r)) : null);
  }

  peaksHint(r) {
    // Why none: the backend says what the trace's name and properties lacked.
    const why = r?.device?.identified_by ? "" : (r?.device?.identification || "");
    return `no peak figures for ${this.deviceName(r)}${why ? ` (${why.replace(/\.$/, "")})` : ""}: give them with --peaks FILE.json or TB_DIAGNOSTICS_PEAKS`;
  }

  unmodelledNote(r) {
    const um = r.unmodelled || [];
    if (!(r.unmodelled_device_us > 0) || !um.length) return null;
    const top = [...um].sort((a, b) => b.device_us - a.device_us);
    // The heaviest with its reason (often the one to act on), the next two by name.
    const names = top.slice(0, 3).map((x, i) => `${shortName(x.name, 40)} ${dur(x.device_us)}${i ? "" : ` — ${x.reason}`}`).join("; ");
    return h("div", { class: "rf-note", id: "roofline-unmodelled", title: top.map((x) => `${x.name}: ${x.calls} calls, ${dur(x.device_us)} — ${x.reason}`).join("\n") },
      `${ms(r.unmodelled_device_us)} ms of device time has no cost model: ${names}${top.length > 3 ? `; ${top.length - 3} more` : ""}.`);
  }

  renderNotes(r, state) {
    const notes = [];
    const peaks = r.device?.peaks || {};
    if (state === "no-peaks") {
      notes.push(h("div", { class: "banner", id: "roofline-no-peaks" }, `${this.peaksHint(r)}; achieved FLOP/s is plotted without ceilings.`));
    } else {
      const missing = [...new Set(this.ops.map((o) => o.peak_precision).filter((p) => p && peaks[p] == null))];
      if (missing.length) notes.push(h("div", { class: "rf-note" }, `no ${missing.join(", ")} peak for ${this.deviceName(r)}: those ops have no ceiling (--peaks FILE.json).`));
      if (!peaks.hbm_gbps) notes.push(h("div", { class: "rf-note" }, `no memory bandwidth for ${this.deviceName(r)}: flat ceilings only.`));
    }
    const off = (r.ops || []).filter((o) => !plottable(o));
    const flat = off.filter((o) => !(o.flops > 0) && o.device_us > 0);
    if (off.length) {
      const t = flat.reduce((a, o) => a + o.device_us, 0);
      const rest = off.length - flat.length;
      notes.push(h("div", { class: "rf-note", title: off.map((o) => `${o.name} ${shapes(o.input_dims, 80)} · ${dur(o.device_us)}`).join("\n") },
        `Not on the log axes: ${flat.length ? `${flat.length} op group${flat.length > 1 ? "s" : ""} that only move data (copies, fills; ${dur(t)}, in the table)` : ""}` +
        `${flat.length && rest ? " and " : ""}${rest ? `${rest} with no device time` : ""}.`));
    }
    notes.push(this.hostLinkNote(r));
    if (r.ops_total > r.ops.length) notes.push(h("div", { class: "rf-note" }, `the ${r.ops.length} heaviest of ${r.ops_total} op groups.`));
    notes.push(this.unmodelledNote(r));
    // The backend's notes, but for the two said above in the tab's words.
    for (const n of r.notes || []) if (!/record_shapes|no peak figures/.test(n)) notes.push(h("div", { class: "rf-note" }, n));
    this.notes.replaceChildren(...notes.filter(Boolean));
    this.notes.hidden = !this.notes.children.length;
  }

  /** Copies between host and device have no FLOPs (not on the log axes): their ceiling,
   * the host link, is said in words next to the chart. */
  hostLinkNote(r) {
    const link = r.host_link;
    const copies = (r.ops || []).filter((o) => o.bound === "host-link");
    if (!link || !copies.length) return null;
    const t = copies.reduce((a, o) => a + o.device_us, 0);
    const paged = copies.some((o) => o.pageable);
    return h("div", { class: "rf-note", id: "roofline-host-link", title: `host link: ${link.source}` },
      h("span", { class: "rf-bound host-link" }, "host-link ceiling"),
      ` ${+link.gbps.toPrecision(4)} GB/s per direction (${link.name}${link.by_capability ? ", from the compute capability" : ""}): ` +
      `${copies.length} host↔device copy group${copies.length > 1 ? "s" : ""} (${dur(t)}) rated against it, not HBM` +
      `${paged ? "; pageable copies stage through a pinned buffer and rarely reach it" : ""}.`);
  }

  renderTable(r) {
    const byLoss = (r.ops || []).some((o) => o.roofline_pct !== null && o.roofline_pct !== undefined);
    const key = (o) => (byLoss ? o.loss_us || 0 : o.device_us || 0);
    this.top = [...r.ops].sort((a, b) => key(b) - key(a)).slice(0, TOP_OPS);
    const head = h("tr", null, ["Op", "Shapes", "Prec.", "Bound", "Dev. ms", byLoss ? "Roofline" : ""].map((t, i) =>
      h("th", { class: i >= 4 ? "num" : "", scope: "col", title: i === 5 ? "ideal time on the roofline / measured time" : null }, t)));
    this.tbody = h("tbody", { onkeydown: (e) => this.tableKey(e) }, this.top.map((o, i) => h("tr", {
      tabindex: i ? -1 : 0, dataset: { index: i }, "aria-selected": "false",
      title: this.describe(o).join("\n"), onclick: () => this.open(o),
    },
    h("td", { class: "rf-op" }, shortName(o.name, 48)),
    h("td", { class: "rf-shapes" }, shapes(o.input_dims, 44)),
    h("td", null, o.precision || "—"),
    h("td", null, o.bound ? h("span", { class: `rf-bound ${o.bound}` }, BOUND_LABEL[o.bound]) : "—"),
    h("td", { class: "num" }, ms(o.device_us)),
    h("td", { class: "num" }, byLoss ? pct1(o.roofline_pct) : ""))));
    this.side.replaceChildren(
      h("h3", { class: "rf-caption" }, byLoss ? "Most time lost against the roofline" : "Heaviest ops (no peaks: no loss figure)"),
      h("table", { class: "data rf-table", "aria-label": "ops that lose the most time" },
        h("colgroup", null, ["31%", "26%", "9%", "12%", "11%", "11%"].map((w) => h("col", { style: { width: w } }))),
        h("thead", null, head), this.tbody));
  }

  /** The op in words: the tooltip's and the table row's title lines. */
  describe(o) {
    const st = o.steps?.length ? ` (step ${stepLabel(o.steps[0])})` : "";
    return [
      o.name,
      shapes(o.input_dims, 140) || "no tensor inputs",
      `${o.precision || "?"}${o.peak_precision && o.peak_precision !== o.precision ? ` (on the ${o.peak_precision} roof)` : ""} · ${o.calls} call${o.calls === 1 ? "" : "s"} · ${dur(o.device_us)} on the device`,
      `${siFlops(o.achieved_tflops, "FLOP/s")} · ${o.achieved_gbps === null || o.achieved_gbps === undefined ? "—" : `${+o.achieved_gbps.toPrecision(3)} GB/s`} · ${o.intensity === null ? "—" : +Number(o.intensity).toPrecision(3)} FLOP/byte`,
      ...(o.bound === "host-link" ? [`${o.achieved_link_gbps ?? "—"} GB/s over the host link (ceiling ${o.link_gbps} GB/s)${o.pageable ? " · pageable" : ""}`] : []),
      o.roofline_pct === null || o.roofline_pct === undefined
        ? `${o.bound ? `${o.bound}-bound` : "no bound"} · no peak to compare with`
        : `${pct1(o.roofline_pct)} of its roofline · ${o.bound}-bound · ${dur(o.loss_us)} lost`,
      `click${this.wrap.matches(":focus-visible") ? " or Enter" : ""}: open its first call${st}`,
    ];
  }

  showTip(op, at) {
    if (!op) {
      this.tip.hidden = true;
      return;
    }
    const [name, ...rest] = this.describe(op);
    this.tip.replaceChildren(h("div", { class: "n" }, name), ...rest.map((t) => h("div", { class: "m" }, t)));
    this.tip.hidden = false;
    // Beside the bubble, flipped and clamped so it stays inside the chart.
    const W = this.wrap.clientWidth;
    const H = this.wrap.clientHeight;
    const tw = this.tip.offsetWidth;
    const th = this.tip.offsetHeight;
    let left = at.x + at.r + 10;
    if (left + tw > W) left = at.x - at.r - 10 - tw;
    const top = Math.min(Math.max(at.y - th / 2, 0), Math.max(H - th, 0));
    this.tip.style.left = `${Math.max(Math.min(left, W - tw), 0)}px`;
    this.tip.style.top = `${top}px`;
  }

  open(op) {
    this.opened = op;
    this.chart.select(op);
    for (const tr of this.tbody?.children || []) {
      tr.setAttribute("aria-selected", this.top[Number(tr.dataset.index)] === op ? "true" : "false");
    }
    this.onOpen(op);
  }

  key(e) {
    if (e.target !== this.wrap || !this.ops?.length) return;
    const n = this.ops.length;
    const at = this.chart.active;
    let next = null;
    if (e.key === "ArrowRight" || e.key === "ArrowDown") next = at === null ? 0 : Math.min(at + 1, n - 1);
    else if (e.key === "ArrowLeft" || e.key === "ArrowUp") next = at === null ? 0 : Math.max(at - 1, 0);
    else if (e.key === "Home") next = 0;
    else if (e.key === "End") next = n - 1;
    else if ((e.key === "Enter" || e.key === " ") && at !== null) {
      e.preventDefault();
      this.open(this.ops[at]);
      return;
    } else if (e.key === "Escape") {
      this.chart.setActive(null);
      return;
    } else return;
    e.preventDefault();
    this.chart.setActive(next);
  }

  tableKey(e) {
    const rows = [...this.tbody.children];
    const at = rows.indexOf(document.activeElement);
    if (at < 0) return;
    let next = null;
    if (e.key === "ArrowDown") next = rows[Math.min(at + 1, rows.length - 1)];
    else if (e.key === "ArrowUp") next = rows[Math.max(at - 1, 0)];
    else if (e.key === "Enter" || e.key === " ") {
      e.preventDefault();
      this.open(this.top[at]);
      return;
    }
    if (!next) return;
    e.preventDefault();
    rows.forEach((tr) => { tr.tabIndex = tr === next ? 0 : -1; });
    next.focus();
  }
}
