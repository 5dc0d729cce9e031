// The steps chart: one bar per step, wall time stacked into device-busy and
// the four idle causes, a verdict-coloured cap on each bar, cold / artefact
// marks above it. Drawn with uPlot (vendored, MIT).

import uPlot from "../vendor/uplot/uPlot.esm.js";
import { h } from "./dom.js";
import { CAUSES, CAUSE_LABEL, causeColor, cssVar, dur, pct, stepLabel, verdictColor } from "./format.js";

const LAYERS = ["busy", ...CAUSES]; // bottom to top

function stackedSeries(steps) {
  // uPlot draws series in order; each later series overdraws the lower part of
  // the earlier ones, so cumulative sums drawn top-first read as a stack.
  const parts = LAYERS.map((c) => steps.map((s) => (c === "busy" ? s.device_busy_us : s.idle[`${c}_us`]) / 1000));
  const cum = [];
  let acc = steps.map(() => 0);
  for (const p of parts) {
    acc = acc.map((v, i) => v + p[i]);
    cum.push(acc);
  }
  return cum.reverse(); // [total (other on top), …, busy]
}

export function legend() {
  return h("div", { class: "legend", style: { padding: 0 }, title: "each bar: the step's wall time; its cap: the verdict's colour" },
    LAYERS.map((c) => h("span", null, h("i", { style: { background: `var(--c-${c})` } }), CAUSE_LABEL[c])));
}

export class StepChart {
  constructor(container, { onSelect }) {
    this.container = container;
    this.onSelect = onSelect;
    this.plot = null;
    this.steps = [];
    this.selected = -1;
    this.ro = new ResizeObserver(() => this.resize());
    this.ro.observe(container);
  }

  setData(steps, selected) {
    this.steps = steps;
    this.selected = selected;
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
    const opts = {
      width: Math.max(this.container.clientWidth - 12, 200),
      height: 124,
      padding: [14, 8, 0, 0],
      legend: { show: false },
      cursor: { drag: { x: false, y: false }, points: { show: false }, y: false },
      select: { show: false },
      scales: {
        x: { time: false, range: [-0.5, steps.length - 0.5] },
        y: { range: (u, lo, hi) => [0, hi * 1.06 || 1] },
      },
      axes: [
        {
          stroke: muted, grid: { show: false }, ticks: { show: false }, size: 22,
          splits: () => xs,
          values: (u, vals) => vals.map((v) => (Number.isInteger(v) && steps[v] ? stepLabel(steps[v].step) : "")),
        },
        {
          stroke: muted, size: 58, grid: { stroke: line, width: 1 }, ticks: { show: false },
          values: (u, vals) => vals.map((v) => `${+v.toFixed(1)} ms`),
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
    ctx.save();
    this.steps.forEach((s, i) => {
      const cx = u.valToPos(i, "x", true);
      const total = s.wall_us / 1000;
      const y = u.valToPos(total, "y", true);
      ctx.fillStyle = verdictColor(s.verdict);
      ctx.fillRect(cx - w / 2, y - 4 * dpr, w, 4 * dpr);
      if (s.flags && s.flags.length) {
        ctx.fillStyle = cssVar("--muted");
        ctx.font = `${10 * dpr}px sans-serif`;
        ctx.textAlign = "center";
        ctx.fillText(s.flags.join(" · "), cx, y - 7 * dpr);
      }
      if (i === this.selected) {
        ctx.strokeStyle = cssVar("--fg");
        ctx.lineWidth = 2 * dpr;
        const y0 = u.valToPos(0, "y", true);
        ctx.strokeRect(cx - w / 2 - 3 * dpr, y - 6 * dpr, w + 6 * dpr, y0 - y + 6 * dpr);
      }
    });
    ctx.restore();
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
      ...CAUSES.map((c) => h("div", { class: "m" }, `${CAUSE_LABEL[c]}: ${dur(s.idle[`${c}_us`])}`)),
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
