// The timeline's critical-path highlight (issue 27): the selected step's path, every
// segment in time order from the step route, drawn over the step's timeline. Each
// segment is a stretch of one event's time (a kernel, a host call's dispatch, the wait
// between a launch and its kernel), so it is drawn on that event's row, filled in its
// kind's colour and outlined; everything else is dimmed. A toggle in the card's tools
// and the "c" key on the timeline switch it. The step view only: the whole span has no
// one step's path.
//
// The timeline keeps at most ~5,000 events of a step (the longest): a segment whose event
// it left out (or a Python frame, never drawn) is drawn on its lane (the JSON's `lane`),
// one row below the deepest event shown there at its time: its event's own row wherever
// the event's parent is shown (70-97 % of such segments on the three shared traces that
// cut most), else its parent's row, which the timeline left out too.

import { h } from "./dom.js";
import { cssVar, dur, ownName } from "./format.js";
import { PATH_KINDS, PATH_LABEL, pathSplit } from "./pathkinds.js";
import { LABEL_W, ROW_H } from "./tldraw.js";

/** Outlined when at least this wide (px); narrower segments are filled only. */
const OUTLINE_MIN_PX = 4;
/** Joins between consecutive segments, drawn when no more segments than this are in view. */
const JOIN_MAX = 400;

export class PathLayer {
  constructor(view) {
    this.view = view;
    this.on = false;
    this.cp = null;
    this.placed = null;
    // The tab's controller (none for a bare timeline): its state, in the URL, keeps the toggle.
    this.app = view.span?.app || null;
    this.button = h("button", {
      class: "tl-path", "aria-pressed": "false", onclick: () => this.toggle(),
      title: "highlight the selected step's critical path: what its end waits on (c)",
    }, "critical path");
    view.root.closest(".card")?.querySelector(".card-tools .tools")?.append(this.button);
    view.root.dataset.path = "off";
    view.canvas.addEventListener("keydown", (e) => {
      if (e.key !== "c" || e.ctrlKey || e.metaKey || e.altKey) return;
      this.toggle();
      e.preventDefault();
    });
  }

  /** The step route's `critical_path` of the step now loaded (null: none). */
  setStep(cp) {
    this.cp = cp || null;
    this.placed = null;
    this.button.disabled = !this.cp;
    // What the URL says (a shared link, a pasted hash), before the step is drawn.
    if (this.app) this.mark(this.app.state.path === "on");
  }

  active() {
    const v = this.view;
    return this.on && !!this.cp && v.mode !== "span" && !!v.tl && v.tl.mode !== "span";
  }

  mark(on) {
    this.on = on;
    this.button.setAttribute("aria-pressed", String(on));
    this.view.root.dataset.path = on ? "on" : "off";
  }

  toggle(on = !this.on) {
    this.mark(on);
    this.app?.setState({ path: on ? "on" : null });
    if (!this.view.tl) return;
    this.view.describe();
    this.view.draw();
  }

  /** Each segment's lane and row on the timeline shown now (once per step payload). */
  place() {
    const tl = this.view.tl;
    if (this.placed && this.placedFor === tl) return this.placed;
    const ev = tl.events;
    const laneOf = new Map();
    tl.lanes.forEach((ln, i) => { if (!laneOf.has(ln.label)) laneOf.set(ln.label, i); });
    const segs = [];
    let cut = 0;
    this.byRow = new Map();
    for (const g of this.cp.segments) {
      const i = this.view.rowIndex.get(g.row);
      let lane, depth;
      if (i !== undefined) {
        lane = ev.lane[i];
        depth = ev.depth[i];
      } else {
        lane = laneOf.get(g.lane);
        if (lane === undefined) continue; // a lane the timeline has no event of
        depth = this.depthAt(lane, g.start_us + g.dur_us / 2);
        cut++;
      }
      segs.push({ ...g, laneIdx: lane, depth, event: i });
      if (i !== undefined) {
        const r = this.byRow.get(i) || { us: 0, n: 0, kinds: new Set() };
        r.us += g.dur_us;
        r.n += 1;
        r.kinds.add(g.kind);
        this.byRow.set(i, r);
      }
    }
    this.placed = segs;
    this.placedFor = tl;
    this.cut = cut;
    this.view.root.dataset.pathSegments = String(segs.length);
    this.view.root.dataset.pathCut = String(cut);
    return segs;
  }

  /** One row below the deepest event the timeline shows on `lane` at time `t`. */
  depthAt(lane, t) {
    const v = this.view, ev = v.tl.events;
    const rows = Math.max(v.tl.lanes[lane].depth, 1);
    for (let d = rows - 1; d >= 0; d--) {
      const group = v.groups.get(lane * 64 + d);
      if (!group) continue;
      let lo = 0, hi = group.length - 1, best = -1;
      while (lo <= hi) { // the last event there starting by t: rows of a depth never overlap
        const mid = (lo + hi) >> 1;
        if (ev.start_us[group[mid]] <= t) { best = mid; lo = mid + 1; } else hi = mid - 1;
      }
      if (best >= 0 && ev.start_us[group[best]] + ev.dur_us[group[best]] >= t) return Math.min(d + 1, rows - 1);
    }
    return 0;
  }

  /** Over the drawn timeline: dim it, then the path's segments in view. */
  draw(ctx, v) {
    const root = this.view.root;
    if (!this.active()) {
      root.dataset.pathVisible = "0";
      root.dataset.pathOutlined = "0";
      root.tbdPathOutlined = [];
      return;
    }
    const segs = this.place();
    const { W, H, pal, x, lay } = v;
    ctx.fillStyle = pal.card;
    ctx.globalAlpha = 0.72;
    ctx.fillRect(LABEL_W, 0, W - LABEL_W, H);
    ctx.globalAlpha = 1;
    const color = Object.fromEntries(PATH_KINDS.map((k) => [k, cssVar(`--cp-${k}`) || pal.fg]));
    // Per row and pixel column, the kind with the most path time there is painted: a
    // backlog's 1 µs queueing gaps between kernels must not paint every kernel boundary
    // in the latency colour. A wider segment counts in the pixels its ends fall in.
    const usPerPx = (v.t1 - v.t0) / Math.max(W - LABEL_W - 6, 1);
    const pixels = new Map();
    const flush = (key) => {
      const p = pixels.get(key);
      if (!p) return;
      let best = null;
      for (const k in p.us) if (best === null || p.us[k] > p.us[best]) best = k;
      ctx.fillStyle = color[best];
      ctx.fillRect(p.px, p.y, 1, ROW_H - 2);
      pixels.delete(key);
    };
    const count = (key, px, y, kind, us) => {
      if (px < LABEL_W || px >= W) return;
      if (pixels.has(key) && pixels.get(key).px !== px) flush(key);
      if (!pixels.has(key)) pixels.set(key, { px, y, us: {} });
      const p = pixels.get(key);
      p.us[kind] = (p.us[kind] || 0) + us;
    };
    const inView = [], outlined = [];
    for (const g of segs) {
      const x0 = x(g.start_us), x1 = x(g.start_us + g.dur_us);
      if (x1 < LABEL_W || x0 > W) continue;
      inView.push(g);
      const key = g.laneIdx * 64 + g.depth;
      const y = lay.top[g.laneIdx] + g.depth * ROW_H;
      const p0 = Math.floor(x0), p1 = Math.floor(x1);
      if (p0 === p1) {
        count(key, p0, y, g.kind, g.dur_us);
        continue;
      }
      const left = Math.max(x0, LABEL_W);
      ctx.fillStyle = color[g.kind];
      ctx.fillRect(left, y, Math.min(x1, W) - left, ROW_H - 2);
      count(key, p0, y, g.kind, (p0 + 1 - x0) * usPerPx);
      flush(key); // its first pixel: decided now
      count(key, p1, y, g.kind, (x1 - p1) * usPerPx);
      if (x1 - x0 >= OUTLINE_MIN_PX) outlined.push([g, left, y, Math.min(x1, W) - left]);
    }
    for (const key of [...pixels.keys()]) flush(key);
    ctx.strokeStyle = pal.fg;
    ctx.lineWidth = 1.5;
    ctx.font = "11px sans-serif";
    ctx.textBaseline = "middle";
    const ink = cssVar("--cp-text") || "#fff";
    for (const [g, left, y, w] of outlined) {
      ctx.setLineDash(g.kind === "latency" ? [3, 2] : []); // waiting, not running
      ctx.strokeRect(left + 0.75, y + 0.75, Math.max(w - 1.5, 1), ROW_H - 3.5);
      if (w > 36) {
        const n = Math.floor((w - 6) / 6.2);
        const text = ownName(g.name) || g.name || "";
        const label = text.length <= n ? text : `${text.slice(0, n - 1)}…`;
        if (n > 1 && label) {
          ctx.fillStyle = ink;
          ctx.fillText(label, left + 3, y + (ROW_H - 2) / 2 + 0.5);
        }
      }
    }
    ctx.setLineDash([]);
    if (inView.length <= JOIN_MAX) this.joins(ctx, v, inView);
    root.dataset.pathVisible = String(inView.length);
    root.dataset.pathOutlined = String(outlined.length);
    // For tests and anyone inspecting the page: the segments outlined now.
    root.tbdPathOutlined = outlined.map(([g]) => ({ row: g.row, name: g.name, kind: g.kind, start_us: g.start_us }));
    const mark = (i, width) => {
      if (i === null || i === undefined) return;
      const ev = this.view.tl.events;
      const y = lay.top[ev.lane[i]] + ev.depth[i] * ROW_H;
      const x0 = Math.max(x(ev.start_us[i]), LABEL_W);
      ctx.strokeStyle = pal.hl;
      ctx.lineWidth = width;
      ctx.strokeRect(x0 - 1, y - 1, Math.max(x(ev.start_us[i] + ev.dur_us[i]) - x0, 2) + 2, ROW_H);
    };
    // The dimming covers a finding's evidence, the hover and the selection: outline them
    // again, in the highlight colour (the path's own outlines are in the text colour).
    for (const i of v.highlight || []) mark(i, 3);
    mark(v.selected, 2);
    if (v.hover !== v.selected) mark(v.hover, 1);
  }

  /** Thin joins from each segment's end to the next one's start where the row changes. */
  joins(ctx, v, segs) {
    const mid = (g) => v.lay.top[g.laneIdx] + g.depth * ROW_H + (ROW_H - 2) / 2;
    ctx.strokeStyle = v.pal.fg;
    ctx.globalAlpha = 0.6;
    ctx.lineWidth = 1;
    ctx.beginPath();
    for (let k = 1; k < segs.length; k++) {
      const a = segs[k - 1], b = segs[k];
      if (a.laneIdx === b.laneIdx && a.depth === b.depth) continue;
      const px = Math.max(v.x(b.start_us), LABEL_W) + 0.5;
      ctx.moveTo(px, mid(a));
      ctx.lineTo(px, mid(b));
    }
    ctx.stroke();
    ctx.globalAlpha = 1;
  }

  /** The info line's part: the path's split, or how to switch it on. */
  describeLine() {
    if (!this.cp || this.view.mode === "span") return null;
    if (!this.active()) return h("span", { class: "tl-path-info" }, "c: critical path");
    this.place();
    const cp = this.cp;
    const omitted = cp.segments_omitted ? ` (the longest ${cp.segments.length.toLocaleString()} of ${cp.segments_total.toLocaleString()})` : "";
    const cut = this.cut ? ` · ${this.cut.toLocaleString()} drawn where the timeline left out their event` : "";
    return h("span", { class: "tl-path-info", title: "each segment filled in its kind's colour and outlined (a dashed outline: waiting for the device); the rest dimmed" },
      `critical path ${dur(cp.total_us)}: ${cp.segments_total.toLocaleString()} segments${omitted}, ${pathSplit(cp)}${cut}`);
  }

  /** The tooltip's line for event `i` when the path runs through it. */
  tipLine(i) {
    if (!this.active()) return null;
    this.place();
    const r = this.byRow.get(i);
    if (!r) return null;
    const kinds = [...r.kinds].map((k) => PATH_LABEL[k]).join(", ");
    return h("div", { class: "m tl-tip-path" },
      `on the critical path: ${dur(r.us)} (${kinds}${r.n > 1 ? `, ${r.n} segments` : ""})`);
  }
}
