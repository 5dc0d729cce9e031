// The roofline chart: log–log, arithmetic intensity (FLOP/byte) against
// achieved FLOP/s, one bubble per op group (area ∝ device time, colour by
// bound), and the device's ceilings: the HBM slope and one flat roof per
// precision the ops run at. uPlot (vendored) draws the axes and grid and
// tracks the cursor; the ceilings and bubbles are drawn in its draw hook.

import uPlot from "../vendor/uplot/uPlot.esm.js";
import { cssVar } from "./format.js";

const HEIGHT = 300;
const R_MIN = 3; // bubble radius bounds, CSS px
const R_MAX = 18;
const FONT = "11px Roboto, 'Liberation Sans', Arial, sans-serif";

/** 10^k for every k with lo ≤ 10^k ≤ hi. */
function decades(lo, hi) {
  const out = [];
  for (let k = Math.ceil(Math.log10(lo) - 1e-9); k <= Math.floor(Math.log10(hi) + 1e-9); k++) out.push(10 ** k);
  return out;
}

/** [min / lo, max × hi] of the values, at least two decades wide (it holds two ticks). */
function logRange(values, lo = 1.6, hi = lo) {
  const xs = values.filter((v) => v > 0 && Number.isFinite(v));
  if (!xs.length) return [0.1, 1000];
  let a = Math.log10(Math.min(...xs) / lo);
  let b = Math.log10(Math.max(...xs) * hi);
  if (b - a < 2) { const m = (a + b) / 2; a = m - 1; b = m + 1; }
  return [10 ** a, 10 ** b];
}

/** 100 k, 1 M … 1 P: a FLOP/s axis tick from TFLOP/s. */
export function siFlops(tflops, unit = "") {
  if (tflops === null || tflops === undefined) return "—";
  const v = tflops * 1e12;
  const prefixes = [[1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"], [1, ""]];
  const [scale, p] = prefixes.find(([s]) => Math.abs(v) >= s * 0.9995) || [1, ""];
  const x = v / scale;
  const digits = x >= 100 ? 0 : x >= 10 ? 1 : 2;
  return `${+x.toFixed(digits)} ${p}${unit}`;
}

function intensityTick(v) {
  return v >= 1000 ? `${v / 1000}k` : `${+v.toPrecision(1)}`;
}

export function bandwidth(gbps) {
  return gbps >= 1000 ? `${+(gbps / 1000).toFixed(2)} TB/s` : `${+gbps.toFixed(0)} GB/s`;
}

export function peakText(tflops) {
  return `${+tflops.toFixed(tflops >= 100 ? 0 : 1)} TFLOP/s`;
}

/**
 * The roofs to draw: one per distinct peak among the precisions the ops run at
 * (H100's fp32 and fp64 peaks are equal: one line, both names), highest first.
 */
export function ceilings(ops, peaks) {
  const byPeak = new Map();
  for (const key of new Set(ops.map((o) => o.peak_precision).filter(Boolean))) {
    const peak = peaks?.[key];
    if (peak === null || peak === undefined) continue;
    if (!byPeak.has(peak)) byPeak.set(peak, []);
    byPeak.get(peak).push(key);
  }
  return [...byPeak].map(([peak, keys]) => {
    keys.sort();
    return { peak, keys, color: cssVar(`--rf-${keys[0]}`) || cssVar("--muted") };
  }).sort((a, b) => b.peak - a.peak);
}

/** Ops that fit on log–log axes: some FLOPs, some bytes, some device time. */
export const plottable = (o) => o.intensity > 0 && o.achieved_tflops > 0 && o.device_us > 0;

export class RooflineChart {
  /** onHover(op | null, {x, y} CSS px in the container), onClick(op). */
  constructor(container, { onHover, onClick }) {
    this.container = container;
    this.onHover = onHover;
    this.onClick = onClick;
    this.plot = null;
    this.points = [];
    this.active = null; // keyboard / hover point (an index into points)
    this.selected = null; // the opened op
    this.ro = new ResizeObserver(() => this.resize());
    this.ro.observe(container);
  }

  /** ops: plottable ones, heaviest first (the keyboard order); peaks: device peaks or null. */
  setData(ops, peaks) {
    this.ops = ops;
    this.peaks = peaks || {};
    this.build();
  }

  build() {
    this.plot?.destroy();
    this.plot = null;
    if (!this.ops) return;
    const bw = this.peaks.hbm_gbps || null;
    this.roofs = ceilings(this.ops, this.peaks);
    const ridges = bw ? this.roofs.map((c) => (c.peak * 1000) / bw) : [];
    this.xr = logRange([...this.ops.map((o) => o.intensity), ...ridges], 1.6, 2.2);
    // Headroom above the top roof or point for a whole bubble.
    this.yr = logRange([...this.ops.map((o) => o.achieved_tflops), ...this.roofs.map((c) => c.peak)], 1.8, 3);
    const muted = cssVar("--muted");
    const line = cssVar("--line");
    const axis = {
      stroke: muted, font: FONT, labelFont: FONT, labelSize: 18, labelGap: 2,
      grid: { stroke: line, width: 1 }, ticks: { stroke: line, width: 1, size: 4 },
    };
    const sorted = [...this.ops].sort((a, b) => a.intensity - b.intensity);
    const opts = {
      width: this.width(),
      height: HEIGHT,
      padding: [10, this.gutter(), 0, 0],
      legend: { show: false },
      select: { show: false },
      cursor: { x: false, y: false, points: { show: false }, drag: { x: false, y: false, setScale: false } },
      scales: {
        x: { time: false, distr: 3, log: 10, range: () => this.xr },
        y: { distr: 3, log: 10, range: () => this.yr },
      },
      axes: [
        { ...axis, label: "arithmetic intensity (FLOP / byte)", size: 26,
          splits: () => decades(...this.xr), values: (u, vals) => vals.map((v) => (v === null ? "" : intensityTick(v))) },
        { ...axis, label: "achieved FLOP/s", size: 54,
          splits: () => decades(...this.yr), values: (u, vals) => vals.map((v) => (v === null ? "" : siFlops(v))) },
      ],
      series: [{}, { label: "ops", paths: () => null, points: { show: false } }],
      hooks: { draw: [(u) => this.draw(u)], setCursor: [(u) => this.cursorMoved(u)] },
    };
    this.plot = new uPlot(opts, [sorted.map((o) => o.intensity), sorted.map((o) => o.achieved_tflops)], this.container);
    const over = this.plot.over;
    over.style.cursor = "default";
    over.addEventListener("click", () => {
      const i = this.hit(this.plot.cursor.left, this.plot.cursor.top);
      if (i !== null) this.onClick(this.ops[i]);
    });
    over.addEventListener("mouseleave", () => { this.setActive(null); });
    this.layout();
  }

  width() {
    return Math.max(this.container.clientWidth, 260);
  }

  /** Bubble centres and radii (CSS px in the plot area), and the test hooks. */
  layout() {
    const u = this.plot;
    const dmax = Math.max(...this.ops.map((o) => o.device_us), 1e-9);
    this.points = this.ops.map((o) => ({
      x: u.valToPos(o.intensity, "x"),
      y: u.valToPos(o.achieved_tflops, "y"),
      r: Math.min(Math.max(Math.sqrt(o.device_us / dmax) * R_MAX, R_MIN), R_MAX),
    }));
    const ds = this.container.dataset;
    ds.points = String(this.points.length);
    ds.ceilings = String(this.roofs.length);
    ds.memoryRoof = this.peaks.hbm_gbps ? "1" : "0";
    // Where the heaviest points are, relative to uPlot's .u-over: for tests.
    ds.xy = this.points.slice(0, 20).map((p) => `${p.x.toFixed(1)},${p.y.toFixed(1)}`).join(";");
  }

  draw(u) {
    this.layout(); // the scales may have changed (a resize)
    const ctx = u.ctx;
    const dpr = devicePixelRatio || 1;
    const { left, top, width, height } = u.bbox;
    ctx.save();
    ctx.beginPath();
    ctx.rect(left, top, width, height);
    ctx.clip();
    this.drawRoofs(u, ctx, dpr);
    this.drawBubbles(u, ctx, dpr);
    ctx.restore();
    this.drawLabels(u, ctx, dpr);
  }

  drawRoofs(u, ctx, dpr) {
    const bw = this.peaks.hbm_gbps;
    const X = (v) => u.valToPos(v, "x", true);
    const Y = (v) => u.valToPos(v, "y", true);
    const [x0, x1] = this.xr;
    ctx.lineWidth = 2 * dpr;
    ctx.setLineDash([]);
    if (bw) {
      const top = this.roofs.length ? this.roofs[0].peak : this.yr[1];
      const ridge = (top * 1000) / bw;
      ctx.strokeStyle = cssVar("--rf-hbm");
      ctx.beginPath();
      ctx.moveTo(X(x0), Y((x0 * bw) / 1000));
      ctx.lineTo(X(Math.min(ridge, x1)), Y((Math.min(ridge, x1) * bw) / 1000));
      ctx.stroke();
    }
    for (const c of this.roofs) {
      const ridge = bw ? (c.peak * 1000) / bw : x0;
      ctx.strokeStyle = c.color;
      ctx.beginPath();
      ctx.moveTo(X(Math.max(ridge, x0)), Y(c.peak));
      ctx.lineTo(X(x1), Y(c.peak));
      ctx.stroke();
    }
  }

  drawBubbles(u, ctx, dpr) {
    const colour = { compute: cssVar("--rf-compute"), memory: cssVar("--rf-memory") };
    const none = cssVar("--rf-none");
    const ox = u.bbox.left;
    const oy = u.bbox.top;
    // Heaviest first, so the small ones stay visible on top of the big ones.
    this.points.forEach((p, i) => {
      const o = this.ops[i];
      ctx.beginPath();
      ctx.arc(ox + p.x * dpr, oy + p.y * dpr, p.r * dpr, 0, 2 * Math.PI);
      ctx.fillStyle = colour[o.bound] || none;
      ctx.globalAlpha = 0.42;
      ctx.fill();
      ctx.globalAlpha = 0.95;
      ctx.strokeStyle = colour[o.bound] || none;
      ctx.lineWidth = dpr;
      ctx.stroke();
    });
    ctx.globalAlpha = 1;
    for (const [i, w] of [[this.selected, 2], [this.active, 1.5]]) {
      if (i === null || i === undefined || !this.points[i]) continue;
      const p = this.points[i];
      ctx.beginPath();
      ctx.arc(ox + p.x * dpr, oy + p.y * dpr, (p.r + 3) * dpr, 0, 2 * Math.PI);
      ctx.strokeStyle = cssVar("--fg");
      ctx.lineWidth = w * dpr;
      ctx.stroke();
    }
  }

  /**
   * Roof labels in the right-hand gutter, level with their roof (two lines:
   * the precisions, the peak), pushed apart with a leader line when roofs are
   * close; the HBM label along its slope.
   */
  drawLabels(u, ctx, dpr) {
    const { left, top, width, height } = u.bbox;
    ctx.save();
    ctx.font = `${11 * dpr}px Roboto, 'Liberation Sans', Arial, sans-serif`;
    ctx.textBaseline = "alphabetic";
    const block = 25 * dpr;
    const x = left + width + 8 * dpr;
    const ys = [];
    for (const c of this.roofs) { // highest first: top to bottom
      const y = u.valToPos(c.peak, "y", true);
      ys.push(Math.max(y - block / 2, ys.length ? ys[ys.length - 1] + block : 0));
    }
    const over = ys.length ? ys[ys.length - 1] + block - (top + height) : 0;
    for (let i = ys.length - 1, floor = top + height; i >= 0 && over > 0; i--) { // keep inside at the bottom
      ys[i] = Math.min(ys[i], floor - block);
      floor = ys[i];
    }
    this.roofs.forEach((c, i) => {
      const y = u.valToPos(c.peak, "y", true);
      const mid = ys[i] + block / 2;
      ctx.strokeStyle = c.color;
      ctx.lineWidth = dpr;
      ctx.beginPath();
      ctx.moveTo(left + width, y);
      ctx.lineTo(x - 3 * dpr, mid);
      ctx.stroke();
      ctx.fillStyle = c.color;
      ctx.textAlign = "left";
      ctx.fillText(c.keys.join(" · "), x, ys[i] + 11 * dpr);
      ctx.fillText(peakText(c.peak), x, ys[i] + 23 * dpr);
    });
    const card = cssVar("--card");
    const label = (text, lx, ly, color) => {
      const w = ctx.measureText(text).width;
      ctx.globalAlpha = 0.8;
      ctx.fillStyle = card;
      ctx.fillRect(lx - 2 * dpr, ly - 12 * dpr, w + 4 * dpr, 13 * dpr);
      ctx.globalAlpha = 1;
      ctx.fillStyle = color;
      ctx.fillText(text, lx, ly - 2 * dpr);
    };
    if (this.peaks.hbm_gbps) this.slopeLabel(u, ctx, dpr, label, `HBM ${bandwidth(this.peaks.hbm_gbps)}`);
    ctx.restore();
  }

  /** Room on the right for the roof labels (CSS px). */
  gutter() {
    if (!this.roofs.length) return 14;
    const m = document.createElement("canvas").getContext("2d");
    m.font = FONT;
    const w = Math.max(...this.roofs.flatMap((c) => [c.keys.join(" · "), peakText(c.peak)].map((t) => m.measureText(t).width)));
    return Math.ceil(w) + 14;
  }

  slopeLabel(u, ctx, dpr, label, text) {
    const bw = this.peaks.hbm_gbps;
    const top = this.roofs.length ? this.roofs[0].peak : this.yr[1];
    // The visible stretch of the slope: from where it enters the plot to its ridge.
    const xa = Math.max(this.xr[0], (this.yr[0] * 1000) / bw);
    const xb = Math.min(this.xr[1], (top * 1000) / bw);
    if (!(xb > xa)) return;
    const at = 10 ** (Math.log10(xa) + 0.3 * (Math.log10(xb) - Math.log10(xa)));
    const px = u.valToPos(at, "x", true);
    const py = u.valToPos((at * bw) / 1000, "y", true);
    const qx = u.valToPos(at * 2, "x", true);
    const qy = u.valToPos((at * 2 * bw) / 1000, "y", true);
    ctx.save();
    ctx.translate(px, py);
    ctx.rotate(Math.atan2(qy - py, qx - px));
    label(text, 0, -3 * dpr, cssVar("--rf-hbm"));
    ctx.restore();
  }

  /** The topmost (smallest) bubble under a CSS-px position in the plot area, with slack. */
  hit(x, y) {
    if (x === null || x === undefined || x < 0) return null;
    let best = null;
    this.points.forEach((p, i) => {
      const d = Math.hypot(p.x - x, p.y - y);
      if (d <= Math.max(p.r, 5) + 2 && (best === null || p.r < this.points[best].r)) best = i;
    });
    return best;
  }

  cursorMoved(u) {
    const i = this.hit(u.cursor.left, u.cursor.top);
    u.over.style.cursor = i === null ? "default" : "pointer";
    if (i !== this.active) this.setActive(i);
  }

  /** Outline point i (hover or keyboard) and tell the view where it is. */
  setActive(i) {
    this.active = i;
    this.container.dataset.active = i === null ? "" : String(i); // for tests
    this.plot?.redraw(false, false);
    if (i === null || !this.plot) {
      this.onHover(null);
      return;
    }
    const p = this.points[i];
    const over = this.plot.over.getBoundingClientRect();
    const box = this.container.getBoundingClientRect();
    this.onHover(this.ops[i], { x: over.left - box.left + p.x, y: over.top - box.top + p.y, r: p.r });
  }

  select(op) {
    const i = this.ops ? this.ops.indexOf(op) : -1;
    this.selected = i < 0 ? null : i;
    this.container.dataset.selected = i < 0 ? "" : String(i); // for tests
    this.plot?.redraw(false, false);
  }

  resize() {
    if (!this.plot) return;
    const w = this.width();
    if (Math.abs(w - this.plot.width) > 2) {
      this.plot.setSize({ width: w, height: HEIGHT });
      this.layout();
    }
  }
}
