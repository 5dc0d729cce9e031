// The memory chart: one device's allocated and reserved bytes over the span (or a
// step), as the allocator reported them after each event (a step line: the value
// holds until the next event). Step boundaries are thin lines labelled #N, the steps
// a memory finding points at are shaded, the selected step is tinted and the peak
// has a ring. uPlot (vendored) draws the axes, grid and lines; the rest is drawn in
// its draw hook.

import uPlot from "../vendor/uplot/uPlot.esm.js";
import { bytes, cssVar } from "./format.js";

const HEIGHT = 240;
const FONT = "11px Roboto, 'Liberation Sans', Arial, sans-serif";

/** Tick labels for a byte axis: 0, 2 GB, 4 GB… (SI, as the tables). */
const byteTicks = (vals) => vals.map((v) => (v === null ? "" : v === 0 ? "0" : bytes(v)));
/** Tick labels for a time axis in ms since the span's start. */
const msTicks = (vals) => {
  const inc = vals.length > 1 ? Math.abs(vals[1] - vals[0]) : 1;
  const d = Math.max(0, Math.min(3, -Math.floor(Math.log10(inc || 1))));
  return vals.map((v) => (v === null ? "" : `${v.toFixed(d)} ms`));
};

export class MemoryChart {
  /** onPick(time_us): a click or Enter at that time. */
  constructor(container, { onPick }) {
    this.container = container;
    this.onPick = onPick;
    this.plot = null;
    this.data = null;
    this.ro = new ResizeObserver(() => this.resize());
    this.ro.observe(container);
  }

  /** dev: a device of the view document; steps: [{step, start_us, end_us}]; marked: step
   * numbers a finding points at; selected: the selected step number (or undefined). */
  setData(dev, steps, marked, selected) {
    this.data = dev ? { dev, steps: steps || [], marked: new Set(marked || []) } : null;
    this.selected = selected;
    this.build();
  }

  select(step) {
    this.selected = step;
    this.plot?.redraw(false);
  }

  build() {
    this.plot?.destroy();
    this.plot = null;
    if (!this.data) return;
    const { curve } = this.data.dev;
    const t = curve.ts_us.map((x) => x / 1000);
    const muted = cssVar("--muted");
    const line = cssVar("--line");
    const axis = {
      stroke: muted, font: FONT, labelFont: FONT, labelSize: 18, labelGap: 2,
      grid: { stroke: line, width: 1 }, ticks: { stroke: line, width: 1, size: 4 },
    };
    const stepped = uPlot.paths.stepped({ align: 1 });
    // The x range holds the steps too: the first event may come after the first step starts.
    const st = this.data.steps;
    const x0 = Math.min(t[0] ?? 0, ...st.map((s) => s.start_us / 1000));
    const x1 = Math.max(t[t.length - 1] ?? 1, ...st.map((s) => s.end_us / 1000));
    const top = Math.max(...curve.reserved_bytes.map((v) => v ?? 0), ...curve.allocated_bytes.map((v) => v ?? 0), 1);
    const opts = {
      width: Math.max(this.container.clientWidth, 260),
      height: HEIGHT,
      padding: [14, 12, 0, 0],
      legend: { show: false },
      select: { show: false },
      cursor: { y: false, points: { show: false }, drag: { x: false, y: false, setScale: false } },
      scales: { x: { time: false, range: () => [x0, x1 > x0 ? x1 : x0 + 1] }, y: { range: () => [0, top * 1.08] } },
      axes: [
        { ...axis, label: "time since the span's start", size: 28, values: (u, v) => msTicks(v) },
        { ...axis, size: 64, values: (u, v) => byteTicks(v) },
      ],
      series: [
        {},
        { label: "reserved", stroke: cssVar("--mem-reserved"), width: 1.5, dash: [5, 3], paths: stepped, points: { show: false } },
        { label: "allocated", stroke: cssVar("--mem-alloc"), fill: cssVar("--mem-alloc-fill"), width: 1.75, paths: stepped, points: { show: false } },
      ],
      hooks: { drawAxes: [(u) => this.underlay(u)], draw: [(u) => this.overlay(u)] },
    };
    this.plot = new uPlot(opts, [t, curve.reserved_bytes, curve.allocated_bytes], this.container);
    this.plot.over.addEventListener("click", () => {
      const left = this.plot.cursor.left;
      if (left >= 0) this.onPick(this.plot.posToVal(left, "x") * 1000);
    });
  }

  resize() {
    if (!this.plot) return;
    const w = Math.max(this.container.clientWidth, 260);
    if (Math.abs(w - this.plot.width) > 1) this.plot.setSize({ width: w, height: HEIGHT });
  }

  /** Canvas x (device px) of a time in µs. */
  x(u, us) {
    return u.valToPos(us / 1000, "x", true);
  }

  /** Under the lines: shaded steps (findings), the selected step's tint. */
  underlay(u) {
    const { ctx, bbox } = u;
    ctx.save();
    for (const s of this.data.steps) {
      const hit = this.data.marked.has(s.step);
      const sel = s.step === this.selected && this.data.steps.length > 1;
      if (!hit && !sel) continue;
      const a = Math.max(this.x(u, s.start_us), bbox.left);
      const b = Math.min(this.x(u, s.end_us), bbox.left + bbox.width);
      if (b <= a) continue;
      ctx.fillStyle = cssVar(hit ? "--mem-finding" : "--mem-selected");
      ctx.fillRect(a, bbox.top, b - a, bbox.height);
    }
    ctx.restore();
  }

  /** Over the lines: step boundaries with their numbers, and the peak's ring. */
  overlay(u) {
    const { ctx, bbox } = u;
    const dpr = devicePixelRatio || 1;
    ctx.save();
    ctx.font = `${10 * dpr}px Roboto, 'Liberation Sans', Arial, sans-serif`;
    ctx.strokeStyle = cssVar("--mem-step");
    ctx.fillStyle = cssVar("--muted");
    ctx.lineWidth = dpr;
    ctx.setLineDash([3 * dpr, 3 * dpr]);
    ctx.textBaseline = "top";
    ctx.textAlign = "left";
    const steps = this.data.steps;
    // Labels only where they fit (about 28 CSS px each).
    const room = bbox.width / Math.max(steps.length, 1) > 28 * dpr;
    for (const s of steps) {
      const x = Math.round(this.x(u, s.start_us)) + 0.5;
      if (x < bbox.left || x > bbox.left + bbox.width) continue;
      ctx.beginPath();
      ctx.moveTo(x, bbox.top);
      ctx.lineTo(x, bbox.top + bbox.height);
      ctx.stroke();
      if (room && s.step !== null) ctx.fillText(`#${s.step}`, x + 3 * dpr, bbox.top + 2 * dpr);
    }
    const d = this.data.dev;
    if (d.peak_at_us !== null && d.peak_allocated_bytes !== null) {
      const px = this.x(u, d.peak_at_us);
      const py = u.valToPos(d.peak_allocated_bytes, "y", true);
      ctx.setLineDash([]);
      ctx.strokeStyle = cssVar("--mem-peak");
      ctx.lineWidth = 2 * dpr;
      ctx.beginPath();
      ctx.arc(px, py, 5 * dpr, 0, 2 * Math.PI);
      ctx.stroke();
      const label = `peak ${bytes(d.peak_allocated_bytes)}`;
      const w = ctx.measureText(label).width;
      // Above and right of the ring (left where the chart ends), clear of the line.
      const lx = px + 7 * dpr + w > bbox.left + bbox.width ? px - 7 * dpr - w : px + 7 * dpr;
      ctx.fillStyle = cssVar("--fg");
      ctx.textBaseline = "bottom";
      ctx.fillText(label, lx, Math.max(py - 6 * dpr, bbox.top + 22 * dpr));
    }
    ctx.restore();
  }
}
