// The steps chart: one bar per step, wall time stacked into compute, collective
// kernels no compute overlaps and the idle causes, a verdict-coloured cap on
// each bar, cold / artefact marks above it. Drawn with uPlot (vendored, MIT).

import uPlot from "../vendor/uplot/uPlot.esm.js";
import { h } from "./dom.js";
import { CAUSE_LABEL, LAYERS, causeColor, computeBusy, cssVar, dur, partUs, pct, stepLabel, verdictColor } from "./format.js";

function stackedSeries(steps) {
  // uPlot draws series in order; each later series overdraws the lower part of
  // the earlier ones, so cumulative sums drawn top-first read as a stack.
  const parts = LAYERS.map((c) => steps.map((s) => partUs(s, c) / 1000)); // bottom to top
  const cum = [];
  let acc = steps.map(() => 0);
  for (const p of parts) {
    acc = acc.map((v, i) => v + p[i]);
    cum.push(acc);
  }
  return cum.reverse(); // [total (other on top), …, busy]
}

/** A warm step this many times the warm median is clipped too (a checkpoint, a recompile). */
const OUTLIER = 4;
/** Head room above the tallest bar the chart is scaled to, for its cap. */
const HEAD = 1.08;

/**
 * Whether a step ran cold: its `cold` field, decided once by the analysis (the
 * headline, the rules and the what-if read the same); a step of a document written
 * before that field existed falls back to its "cold" flag.
 */
export function isCold(s) {
  if (typeof s.cold === "boolean") return s.cold;
  return s.warm === false || (s.flags || []).includes("cold");
}

/**
 * The y scale (ms): set by the warm steps, so a cold first step 50× longer
 * does not flatten them. Bars above it are clipped (drawn with a break and
 * their real value). The trailing stub (`stub`: the empty step the profiler's last
 * step() opened, neither warm nor cold) is left out like a cold step: where the real
 * steps are all cold, its 27 µs alone would set the scale and clip every real bar.
 * Without a warm step the real ones set it; only a span of nothing but stubs is
 * scaled to them.
 */
export function yScale(steps) {
  const real = steps.filter((s) => !s.stub);
  const warm = real.filter((s) => !isCold(s));
  const walls = (warm.length ? warm : real.length ? real : steps).map((s) => s.wall_us).sort((a, b) => a - b);
  if (!walls.length) return { max: 1, clipped: [] };
  const n = walls.length;
  const median = n % 2 ? walls[(n - 1) / 2] : (walls[n / 2 - 1] + walls[n / 2]) / 2;
  const top = Math.min(walls[n - 1], OUTLIER * median) || walls[n - 1];
  const max = (top * HEAD) / 1000 || 1;
  return { max, clipped: steps.map((s, i) => (s.wall_us / 1000 > max ? i : -1)).filter((i) => i >= 0) };
}

/** Tick labels with as many digits as the tick step needs (warm steps can be 50 µs). */
function axisLabels(vals) {
  const inc = vals.length > 1 ? Math.abs(vals[1] - vals[0]) : Math.abs(vals[0]) || 1;
  if (Math.max(...vals.map(Math.abs)) < 1) {
    const d = Math.max(0, -Math.floor(Math.log10(inc * 1000)));
    return vals.map((v) => `${+(v * 1000).toFixed(d)} µs`);
  }
  const d = Math.max(0, -Math.floor(Math.log10(inc)));
  return vals.map((v) => `${+v.toFixed(d)} ms`);
}

export function legend() {
  return h("div", { class: "legend", style: { padding: 0 }, title: "each bar: the step's wall time; its cap: the verdict's colour" },
    LAYERS.map((c) => h("span", { "data-part": c }, h("i", { style: { background: `var(--c-${c})` } }), CAUSE_LABEL[c])));
}

/** Shows in the legend only the parts some step of the span has (a run without collectives
 * or compilation does not list them); compute busy and "nothing recorded" always stay. */
export function showLegendParts(el, steps) {
  for (const span of el.querySelectorAll("[data-part]")) {
    const c = span.dataset.part;
    span.hidden = !(c === "busy" || c === "other" || steps.some((s) => partUs(s, c) > 0));
  }
}

export class StepChart {
  constructor(container, { onSelect, legend }) {
    this.container = container;
    this.onSelect = onSelect;
    this.legend = legend; // the card's legend element: lists the parts these steps have
    this.plot = null;
    this.steps = [];
    this.selected = -1;
    this.ro = new ResizeObserver(() => this.resize());
    this.ro.observe(container);
  }

  setData(steps, selected) {
    this.steps = steps;
    this.selected = selected;
    if (this.legend) showLegendParts(this.legend, steps);
    this.build();
  }

  select(index) {
    this.selected = index;
    this.plot?.redraw(false, false);
  }

  /** Rebuild (also on theme change: uPlot reads colours once). */
  build() {
    this.plot?.destroy();
    this.plot = null;
    if (!this.steps.length) return;
    const steps = this.steps;
    const xs = steps.map((_, i) => i);
    const muted = cssVar("--muted");
    const line = cssVar("--line");
    const bars = uPlot.paths.bars({ size: [0.72, 56], align: 0 });
    const top = [...LAYERS].reverse();
    this.scale = yScale(steps);
    const yMax = this.scale.max;
    const opts = {
      width: Math.max(this.container.clientWidth - 12, 200),
      height: 124,
      padding: [14, 8, 0, 0],
      legend: { show: false },
      cursor: { drag: { x: false, y: false }, points: { show: false }, y: false },
      select: { show: false },
      scales: {
        x: { time: false, range: [-0.5, steps.length - 0.5] },
        y: { range: () => [0, yMax] },
      },
      axes: [
        {
          stroke: muted, grid: { show: false }, ticks: { show: false }, size: 22,
          splits: () => xs,
          values: (u, vals) => vals.map((v) => (Number.isInteger(v) && steps[v] ? stepLabel(steps[v].step) : "")),
        },
        {
          stroke: muted, size: 58, grid: { stroke: line, width: 1 }, ticks: { show: false },
          values: (u, vals) => axisLabels(vals),
        },
      ],
      series: [{}, ...top.map((c) => ({
        label: CAUSE_LABEL[c], fill: causeColor(c), stroke: causeColor(c), width: 0,
        paths: bars, points: { show: false },
      }))],
      hooks: {
        draw: [(u) => this.decorate(u)],
        setCursor: [(u) => this.hover(u)],
      },
    };
    this.plot = new uPlot(opts, [xs, ...stackedSeries(steps)], this.container);
    this.plot.over.addEventListener("click", () => {
      const i = this.plot.cursor.idx;
      if (i !== null && i !== undefined) this.onSelect(i);
    });
    this.plot.over.style.cursor = "pointer";
    this.tip = h("div", { class: "tl-tip", hidden: true });
    this.plot.over.append(this.tip);
    this.plot.over.addEventListener("mouseleave", () => { this.tip.hidden = true; });
  }

  /** Verdict caps, flags and the selection outline, on top of the bars. */
  decorate(u) {
    const ctx = u.ctx;
    const dpr = devicePixelRatio || 1;
    const slot = (u.valToPos(1, "x", true) - u.valToPos(0, "x", true)) || u.bbox.width;
    const w = Math.min(slot * 0.72, 56 * dpr);
    const clipped = new Set(this.scale.clipped);
    const bars = [];
    ctx.save();
    this.steps.forEach((s, i) => {
      const cx = u.valToPos(i, "x", true);
      const total = s.wall_us / 1000;
      const clip = clipped.has(i);
      const y = clip ? u.bbox.top : u.valToPos(total, "y", true);
      if (clip) this.breakMark(ctx, cx, w, y + 14 * dpr, dpr);
      ctx.fillStyle = verdictColor(s.verdict);
      ctx.fillRect(cx - w / 2, y - 4 * dpr, w, 4 * dpr);
      // A clipped bar says how tall it really is, next to its flags ("cold").
      const label = [clip ? dur(s.wall_us) : null, ...(s.flags || [])].filter(Boolean).join(" · ");
      if (label) {
        ctx.fillStyle = clip ? cssVar("--fg") : cssVar("--muted");
        ctx.font = `${clip ? "600 " : ""}${10 * dpr}px sans-serif`;
        ctx.textAlign = "center";
        ctx.fillText(label, cx, y - 7 * dpr);
      }
      bars.push({ index: i, step: s.step, top: (y - 4 * dpr) / dpr, bottom: u.valToPos(0, "y", true) / dpr,
        x: cx / dpr, clipped: clip, label });
      if (i === this.selected) {
        ctx.strokeStyle = cssVar("--fg");
        ctx.lineWidth = 2 * dpr;
        const y0 = u.valToPos(0, "y", true);
        ctx.strokeRect(cx - w / 2 - 3 * dpr, y - 6 * dpr, w + 6 * dpr, y0 - y + 6 * dpr);
      }
    });
    ctx.restore();
    // The drawn bars in CSS pixels of the canvas, for tests and anyone inspecting the page.
    u.root.parentElement.dataset.bars = JSON.stringify(bars);
    u.root.parentElement.dataset.yMaxMs = String(+this.scale.max.toFixed(3));
  }

  /** Two slanted cuts across a bar whose top is beyond the scale. */
  breakMark(ctx, cx, w, y, dpr) {
    const x0 = cx - w / 2 - 2 * dpr, x1 = cx + w / 2 + 2 * dpr, slant = 4 * dpr, gap = 4 * dpr;
    ctx.fillStyle = cssVar("--card");
    ctx.beginPath();
    ctx.moveTo(x0, y + slant);
    ctx.lineTo(x1, y - slant);
    ctx.lineTo(x1, y - slant + gap);
    ctx.lineTo(x0, y + slant + gap);
    ctx.closePath();
    ctx.fill();
    ctx.strokeStyle = cssVar("--muted");
    ctx.lineWidth = dpr;
    ctx.beginPath();
    ctx.moveTo(x0, y + slant);
    ctx.lineTo(x1, y - slant);
    ctx.moveTo(x0, y + slant + gap);
    ctx.lineTo(x1, y - slant + gap);
    ctx.stroke();
  }

  hover(u) {
    const i = u.cursor.idx;
    if (!this.tip) return;
    if (i === null || i === undefined || !this.steps[i]) {
      this.tip.hidden = true;
      return;
    }
    const s = this.steps[i];
    this.tip.replaceChildren(
      h("div", null, h("strong", null, `Step ${stepLabel(s.step)}`), ` · ${s.verdict}`),
      h("div", { class: "m" }, `wall ${dur(s.wall_us)} · device busy ${dur(s.device_busy_us)} (${pct(s.device_busy)})`),
      h("div", { class: "m" }, `${CAUSE_LABEL.busy}: ${dur(partUs(s, "busy"))} (${pct(computeBusy(s))})`),
      ...LAYERS.slice(1).map((c) => h("div", { class: "m" }, `${CAUSE_LABEL[c]}: ${dur(partUs(s, c))}`)),
    );
    this.tip.hidden = false;
    const x = u.valToPos(i, "x");
    const left = x + 150 > u.over.clientWidth ? x - 190 : x + 20;
    Object.assign(this.tip.style, { left: `${Math.max(left, 0)}px`, top: "4px" });
  }

  resize() {
    if (!this.plot) return;
    const w = Math.max(this.container.clientWidth - 12, 200);
    if (Math.abs(w - this.plot.width) > 2) this.plot.setSize({ width: w, height: 124 });
  }
}
