// Drawing the timeline canvas (layout and interaction live in timeline.js).

import { cssVar } from "./format.js";

export const LABEL_W = 150;
export const ROW_H = 15;
export const LANE_GAP = 8;
export const AXIS_H = 22;
const KINDS = ["op", "annotation", "step", "runtime", "driver", "kernel", "memcpy", "memset",
  "gpu_annotation", "gpu_sync", "overhead", "python", "other"];

export function palette() {
  const p = {};
  for (const k of KINDS) p[k] = cssVar(`--k-${k}`) || cssVar("--k-other");
  for (const k of ["fg", "muted", "faint", "line", "card", "bg", "hl", "hover", "select", "focus"]) p[k] = cssVar(`--${k}`);
  return p;
}

/** Lane tops and the canvas height: each lane is (depth rows) + a gap. */
export function layout(lanes) {
  const top = [];
  let y = 4;
  for (const ln of lanes) {
    top.push(y);
    y += Math.max(ln.depth, 1) * ROW_H + LANE_GAP;
  }
  return { top, height: y + 4 };
}

function truncate(text, px) {
  const n = Math.floor((px - 6) / 6.2);
  if (n <= 1) return "";
  return text.length <= n ? text : `${text.slice(0, n - 1)}…`;
}

/** The whole timeline body: lanes, events, links, highlights, labels. */
export function drawBody(ctx, tl, v) {
  const { W, H, pal, x, lay, hover, selected, highlight, merged } = v;
  const ev = tl.events;
  ctx.clearRect(0, 0, W, H);
  ctx.font = "11px sans-serif";
  ctx.textBaseline = "middle";
  tl.lanes.forEach((ln, i) => {
    if (i % 2) {
      ctx.fillStyle = pal.hover;
      ctx.globalAlpha = 0.45;
      ctx.fillRect(LABEL_W, lay.top[i] - LANE_GAP / 2, W - LABEL_W, Math.max(ln.depth, 1) * ROW_H + LANE_GAP);
      ctx.globalAlpha = 1;
    }
  });
  // The step's own device window; outside it the events belong to neighbours.
  const sw = tl.step_window;
  ctx.fillStyle = pal.faint;
  ctx.globalAlpha = 0.12;
  const a = x(tl.range.start_us), b = x(sw.start_us), c = x(sw.end_us), d = x(tl.range.end_us);
  if (b > a) ctx.fillRect(Math.max(a, LABEL_W), 0, b - Math.max(a, LABEL_W), H);
  if (d > c) ctx.fillRect(Math.max(c, LABEL_W), 0, d - Math.max(c, LABEL_W), H);
  ctx.globalAlpha = 1;
  if (v.steps) drawStepLines(ctx, v);

  const lastX = new Map();
  for (let i = 0; i < ev.row.length; i++) {
    const s = ev.start_us[i], e = s + ev.dur_us[i];
    const x0 = x(s), x1 = x(e);
    if (x1 < LABEL_W || x0 > W) continue;
    const key = ev.lane[i] * 64 + ev.depth[i];
    const w = Math.max(x1 - x0, 1);
    const prev = lastX.get(key);
    if (w < 1.5 && prev !== undefined && x0 < prev) continue; // many tiny events in one pixel: draw one
    lastX.set(key, x0 + w);
    const y = lay.top[ev.lane[i]] + ev.depth[i] * ROW_H;
    ctx.fillStyle = pal[ev.kind[i]] || pal.other;
    // A merged bin is as opaque as its events are busy: a faint block is sparse work.
    const k = merged?.get(i);
    if (k !== undefined) ctx.globalAlpha = 0.35 + 0.65 * Math.min(tl.merged.busy_us[k] / Math.max(ev.dur_us[i], 1e-9), 1);
    ctx.fillRect(Math.max(x0, LABEL_W), y, Math.min(w, W - x0), ROW_H - 2);
    ctx.globalAlpha = 1;
    if (w > 36) {
      const label = truncate((tl.labels || tl.names)[ev.name[i]], Math.min(x1, W) - Math.max(x0, LABEL_W));
      if (label) {
        ctx.fillStyle = "#fff";
        ctx.fillText(label, Math.max(x0, LABEL_W) + 3, y + (ROW_H - 2) / 2 + 0.5);
      }
    }
  }
  drawLinks(ctx, tl, v);
  const outline = (i, color, width) => {
    const y = lay.top[ev.lane[i]] + ev.depth[i] * ROW_H;
    const x0 = Math.max(x(ev.start_us[i]), LABEL_W);
    const w = Math.max(x(ev.start_us[i] + ev.dur_us[i]) - x0, 2);
    ctx.strokeStyle = color;
    ctx.lineWidth = width;
    ctx.strokeRect(x0 - width / 2, y - width / 2, w + width, ROW_H - 2 + width);
  };
  for (const i of highlight) outline(i, pal.hl, 3);
  if (selected !== null) outline(selected, pal.fg, 2);
  if (hover !== null && hover !== selected) outline(hover, pal.fg, 1);

  ctx.fillStyle = pal.card;
  ctx.fillRect(0, 0, LABEL_W, H);
  ctx.strokeStyle = pal.line;
  ctx.lineWidth = 1;
  ctx.beginPath();
  ctx.moveTo(LABEL_W + 0.5, 0);
  ctx.lineTo(LABEL_W + 0.5, H);
  ctx.stroke();
  tl.lanes.forEach((ln, i) => {
    ctx.fillStyle = ln.device ? pal.fg : pal.muted;
    ctx.font = `${ln.device ? "600 " : ""}11px sans-serif`;
    ctx.fillText(truncate(ln.label, LABEL_W - 4), 6, lay.top[i] + ROW_H / 2);
  });
}

/** Launch → kernel links: all of them when few are on screen, else the focused event's. */
function drawLinks(ctx, tl, v) {
  const { x, lay, pal, focus } = v;
  const ev = tl.events;
  const mid = (i) => lay.top[ev.lane[i]] + ev.depth[i] * ROW_H + (ROW_H - 2) / 2;
  const visible = tl.links.filter(([a, b]) => {
    const xa = x(ev.start_us[a]), xb = x(ev.start_us[b]);
    return Math.max(xa, xb) >= LABEL_W && Math.min(xa, xb) <= v.W;
  });
  const mine = focus === null ? [] : visible.filter(([a, b]) => a === focus || b === focus);
  const draw = (links, alpha, width) => {
    ctx.strokeStyle = pal.fg;
    ctx.globalAlpha = alpha;
    ctx.lineWidth = width;
    ctx.beginPath();
    for (const [a, b] of links) {
      const xa = x(ev.start_us[a]), ya = mid(a), xb = x(ev.start_us[b]), yb = mid(b);
      ctx.moveTo(xa, ya);
      ctx.bezierCurveTo(xa, (ya + yb) / 2, xb, (ya + yb) / 2, xb, yb);
    }
    ctx.stroke();
    ctx.globalAlpha = 1;
  };
  if (visible.length <= 150) draw(visible, 0.25, 1);
  if (mine.length) draw(mine, 0.9, 1.5);
}

/** Span mode: a line at each step's start, the selected step lightly shaded. */
function drawStepLines(ctx, v) {
  const { H, pal, x, steps, selectedStep } = v;
  ctx.strokeStyle = pal.muted;
  ctx.globalAlpha = 0.5;
  ctx.setLineDash([3, 3]);
  ctx.beginPath();
  for (const s of steps) {
    const px = Math.round(x(s.start_us)) + 0.5;
    if (px < LABEL_W || px > v.W) continue;
    ctx.moveTo(px, 0);
    ctx.lineTo(px, H);
  }
  ctx.stroke();
  ctx.setLineDash([]);
  const sel = steps.find((s) => s.step === selectedStep);
  if (sel) {
    const a = Math.max(x(sel.start_us), LABEL_W), b = Math.min(x(sel.end_us), v.W);
    ctx.fillStyle = pal.select;
    ctx.globalAlpha = 0.35;
    if (b > a) ctx.fillRect(a, 0, b - a, H);
  }
  ctx.globalAlpha = 1;
}

/** Span mode: the strip of steps above the lanes, each a band labelled with its number. */
export function drawStrip(ctx, v, steps, selectedStep, height) {
  const { W, pal, x } = v;
  ctx.clearRect(0, 0, W, height);
  ctx.font = "11px sans-serif";
  ctx.textBaseline = "middle";
  steps.forEach((s, i) => {
    const a = Math.max(x(s.start_us), LABEL_W), b = Math.min(x(s.end_us), W);
    if (b <= a) return;
    const on = s.step === selectedStep;
    ctx.fillStyle = on ? pal.select : i % 2 ? pal.hover : pal.card;
    ctx.fillRect(a, 1, b - a, height - 2);
    ctx.strokeStyle = on ? pal.fg : pal.line;
    ctx.lineWidth = on ? 1.5 : 1;
    ctx.strokeRect(a + 0.5, 1.5, b - a - 1, height - 3);
    const label = s.step === null ? "span" : `#${s.step}`;
    if (b - a > label.length * 6.5 + 6) {
      ctx.fillStyle = on ? pal.fg : pal.muted;
      ctx.fillText(label, a + 4, height / 2);
    }
  });
  ctx.fillStyle = pal.card;
  ctx.fillRect(0, 0, LABEL_W, height);
  ctx.fillStyle = pal.muted;
  ctx.fillText("steps (click)", 6, height / 2);
}

/** The time axis: ticks relative to the step's (or the span's) start, in readable steps. */
export function drawAxis(ctx, v, origin, title = "time in step") {
  const { W, pal, x, t0, t1 } = v;
  ctx.clearRect(0, 0, W, AXIS_H);
  ctx.font = "11px sans-serif";
  ctx.textBaseline = "middle";
  const span = t1 - t0;
  const target = span / Math.max((W - LABEL_W) / 90, 1);
  const pow = 10 ** Math.floor(Math.log10(target || 1));
  const step = [1, 2, 5, 10].map((m) => m * pow).find((s) => s >= target) || pow * 10;
  const unit = step >= 1000 ? ["ms", 1000] : ["µs", 1];
  ctx.strokeStyle = pal.line;
  ctx.fillStyle = pal.muted;
  for (let t = Math.ceil((t0 - origin) / step) * step; t + origin <= t1; t += step) {
    const px = x(t + origin);
    if (px < LABEL_W) continue;
    ctx.beginPath();
    ctx.moveTo(px + 0.5, AXIS_H - 5);
    ctx.lineTo(px + 0.5, AXIS_H);
    ctx.stroke();
    const label = `${+(t / unit[1]).toFixed(3)} ${unit[0]}`;
    if (px + 3 + label.length * 6.2 <= W) ctx.fillText(label, px + 3, AXIS_H / 2);
  }
  ctx.fillStyle = pal.muted;
  ctx.fillText(title, 6, AXIS_H / 2);
}
