// The steps table: sortable columns, one row per step; click, Enter or the
// arrow keys select a step (which loads its dispatch tree and timeline).

import { h } from "./dom.js";
import { CAUSE_LABEL, LAYERS, computeBusy, dur, mainCauseLabel, ms, partUs, pct, stepLabel, verdictColor } from "./format.js";
import { pathBar, pathLegend } from "./pathkinds.js";

const COLUMNS = [
  { key: "step", label: "Step", value: (s) => s.index },
  { key: "wall", label: "Wall ms", num: true, value: (s) => s.wall_us },
  // Compute, as the verdict reads it; the bar shows collectives and idle time beside it.
  { key: "busy", label: "Compute busy", value: (s) => computeBusy(s) },
  // What the step's end waits on, by kind (sorted by the host's share: host + input).
  { key: "path", label: "Critical path", title: "sort by the path's host share (host + input)",
    value: (s) => (s.critical_path ? (s.critical_path.by_kind.host + s.critical_path.by_kind.input) / (s.critical_path.total_us || 1) : -1) },
  // null (no peak for the precision, no FLOPs) sorts below every figure.
  { key: "flop", label: "FLOP util", num: true, value: (s) => s.flop_utilisation ?? -1 },
  { key: "verdict", label: "Verdict", value: (s) => s.verdict },
  { key: "cause", label: "Main idle cause", value: (s) => s.main_idle_cause || "" },
  { key: "ops", label: "Ops", num: true, value: (s) => s.ops },
  { key: "kernels", label: "Kernels", num: true, value: (s) => s.kernels },
];

/** What each step badge means. */
const FLAG_TITLE = {
  cold: "a cold step: first calls, allocator growth, profiler start",
  inferred: "an iteration inferred without ProfilerStep# events",
  compiling: "compiles inside the window: one-time, left out of the verdict",
  "module-load": "a first launch loads its module: one-time, left out of the verdict and the launch figures",
};

function flopCell(s) {
  const u = s.flop_utilisation;
  const title = u === null || u === undefined
    ? (s.flops ? "no peak figure for this device and precision (--peaks FILE.json)" : "no FLOPs counted (record_shapes off, or no modelled op)")
    : `${s.achieved_tflops === null || s.achieved_tflops === undefined ? "—" : +s.achieved_tflops.toPrecision(3)} TFLOP/s achieved, of the ${s.flop_precision || "?"} peak`;
  return h("td", { class: "num", title }, pct(u));
}

function busyBar(s) {
  const wall = s.wall_us || 1;
  const seg = (c, v) => h("span", { style: { width: `${(100 * v) / wall}%`, background: `var(--c-${c})` } });
  // Busy time split by the roofline model (null without peaks).
  const split = s.busy_compute_bound_us === null || s.busy_compute_bound_us === undefined ? [] : [
    `  compute-bound ops ${dur(s.busy_compute_bound_us)}`, `  memory-bound ops ${dur(s.busy_memory_bound_us)}`,
    `  no cost model ${dur(s.busy_unmodelled_us)}`];
  // Device busy is any activity; the bar splits it into compute and lone collectives.
  const title = [`device busy ${dur(s.device_busy_us)} (${pct(s.device_busy)})`, ...split,
    ...LAYERS.map((c) => `${CAUSE_LABEL[c]} ${dur(partUs(s, c))}`)].join("\n");
  return h("span", { style: { display: "inline-flex", alignItems: "center", gap: "6px" }, title },
    h("span", { class: "bar" }, LAYERS.map((c) => seg(c, partUs(s, c)))),
    h("span", { class: "num", style: { minWidth: "32px" } }, pct(computeBusy(s))));
}

export class StepTable {
  constructor(container, { onSelect }) {
    this.container = container;
    this.onSelect = onSelect;
    this.sort = { key: "step", dir: 1 };
    this.steps = [];
    this.selected = -1;
  }

  setData(steps, selected) {
    this.steps = steps;
    this.selected = selected;
    this.render();
  }

  select(index, focus = false) {
    this.selected = index;
    for (const tr of this.tbody?.children || []) {
      const on = Number(tr.dataset.index) === index;
      tr.setAttribute("aria-selected", on ? "true" : "false");
      tr.tabIndex = on ? 0 : -1;
      if (on && focus) tr.focus();
      if (on) tr.scrollIntoView({ block: "nearest" });
    }
  }

  sorted() {
    const col = COLUMNS.find((c) => c.key === this.sort.key);
    return [...this.steps].sort((a, b) => {
      const x = col.value(a);
      const y = col.value(b);
      return (x < y ? -1 : x > y ? 1 : a.index - b.index) * this.sort.dir;
    });
  }

  render() {
    const head = h("tr", null, COLUMNS.map((c) => h("th", {
      class: c.num ? "num" : "", scope: "col",
      "aria-sort": this.sort.key === c.key ? (this.sort.dir > 0 ? "ascending" : "descending") : null,
    }, h("button", { onclick: () => this.toggleSort(c.key), title: c.title || `sort by ${c.label}` }, c.label))));
    this.tbody = h("tbody", { onkeydown: (e) => this.key(e) }, this.sorted().map((s) => this.row(s)));
    // The path bars' legend, only where some step has a path.
    const caption = this.steps.some((s) => s.critical_path) ? h("caption", { class: "cp-caption" }, pathLegend("critical path:", this.steps)) : null;
    const table = h("table", { class: "data", "aria-label": "steps" }, caption, h("thead", null, head), this.tbody);
    this.container.replaceChildren(table);
    this.select(this.selected);
  }

  row(s) {
    return h("tr", {
      dataset: { index: s.index }, tabindex: -1, "aria-selected": "false",
      onclick: () => this.onSelect(s.index),
    },
    h("td", null, h("strong", null, stepLabel(s.step)),
      // The server says why where it knows (flag_why: an artefact's share of the step).
      (s.flags || []).map((f) => h("span", { class: `badge ${f}`, title: s.flag_why?.[f] || FLAG_TITLE[f] || "distorted by the profiler itself" }, f))),
    h("td", { class: "num" }, ms(s.wall_us)),
    h("td", null, busyBar(s)),
    h("td", null, pathBar(s)),
    flopCell(s),
    // Where the launch backlog decided the verdict, the chip says why.
    h("td", null, h("span", { class: "chip", style: { "--chip": verdictColor(s.verdict) }, title: s.verdict_reason || null }, s.verdict)),
    h("td", { class: "muted" }, mainCauseLabel(s)),
    h("td", { class: "num" }, s.ops.toLocaleString()),
    h("td", { class: "num" }, s.kernels.toLocaleString()));
  }

  toggleSort(key) {
    this.sort = this.sort.key === key ? { key, dir: -this.sort.dir } : { key, dir: key === "step" ? 1 : -1 };
    this.render();
  }

  key(e) {
    const rows = [...this.tbody.children];
    const at = rows.findIndex((tr) => tr === document.activeElement);
    let next = null;
    if (e.key === "ArrowDown") next = rows[Math.min(at + 1, rows.length - 1)];
    else if (e.key === "ArrowUp") next = rows[Math.max(at - 1, 0)];
    else if (e.key === "Home") next = rows[0];
    else if (e.key === "End") next = rows[rows.length - 1];
    else if (e.key === "Enter" || e.key === " ") next = rows[at];
    if (!next) return;
    e.preventDefault();
    const index = Number(next.dataset.index);
    this.select(index, true);
    this.onSelect(index);
  }
}
