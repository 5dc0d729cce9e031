// The timeline: CPU threads and GPU streams as lanes on a canvas, of the selected
// step or (spantl.js) of the whole span, its detail decided by the server.
// Wheel (or +/-, W/S) zooms around the pointer, drag or shift+wheel (or the
// arrow keys, A/D) pans, double-click or 0 fits the step; hover shows an
// event, click selects it and draws its launch → kernel links. A finding's
// evidence is outlined in yellow and the view zooms to it (in the step view).

import { fill, h } from "./dom.js";
import { dur, ownName, shortName } from "./format.js";
import { SpanMode } from "./spantl.js";
import { PathLayer } from "./tlpath.js";
import { AXIS_H, LABEL_W, ROW_H, drawAxis, drawBody, layout, palette } from "./tldraw.js";

/** The tooltip's word for each event kind the timeline route sends (analysis/dispatch.py KIND_LABEL). */
const KIND_WORD = {
  op: "op", annotation: "annotation", runtime: "runtime call", driver: "driver call",
  python: "Python frame", kernel: "kernel", memcpy: "memory copy", memset: "memory set",
  gpu_annotation: "device annotation", gpu_sync: "device sync", trace: "profiler span",
  overhead: "profiler overhead", other: "other event",
};

export class TimelineView {
  /** `app` (the tab's controller) enables the whole-span mode and the Perfetto links. */
  constructor(container, info, app = null) {
    this.info = info;
    this.mode = "step";
    this.axis = h("canvas", { class: "tl-axis", "aria-hidden": "true" });
    this.canvas = h("canvas", {
      tabindex: 0, role: "img", "aria-label": "timeline of the selected step",
    });
    this.scroll = h("div", { class: "tl-scroll" }, this.canvas);
    this.tip = h("div", { class: "tl-tip", hidden: true });
    this.root = h("div", { class: "tl" }, this.axis, this.scroll, this.tip);
    container.replaceChildren(this.root);
    this.tl = null;
    this.hover = null;
    this.selected = null;
    this.highlight = [];
    this.bind();
    this.span = app ? new SpanMode(this, app) : null;
    // How many of the step's events are drawn, in the header beside the title (not only
    // the footer): the server keeps the longest 5,000 of a busy step.
    this.count = h("span", { class: "tl-count muted", id: "timeline-count" });
    const head = this.root.closest(".card")?.querySelector(".card-head");
    head?.insertBefore(this.count, head.querySelector(".card-tools"));
    this.path = new PathLayer(this); // the step's critical path, toggled (tlpath.js)
    new ResizeObserver(() => this.draw()).observe(this.scroll);
  }

  /** The selected step's timeline; shown unless the whole span is (evidence to outline
   * switches back to the step). */
  setData(tl, focusRows = [], path = null) {
    this.path.setStep(path);
    this.stepData = tl;
    this.stepFocus = focusRows;
    this.span?.follow(); // the mode the URL names (spantl.js)
    if (this.span && this.mode === "span") {
      if (!focusRows.length) {
        this.span.stepChanged();
        return;
      }
      this.span.setMode("step");
      this.span.updateLinks();
      return;
    }
    this.span?.updateLinks();
    this.show(tl, focusRows);
  }

  /** Draw `tl` (a step's or the span's payload); `keepView` [t0, t1] keeps the zoom. */
  show(tl, focusRows = [], keepView = null) {
    this.tl = tl;
    // What the bars are labelled with: "cunn_SoftMaxForward", not "void at::na…".
    tl.labels = tl.names.map((n) => ownName(n) || n);
    this.pal = palette();
    this.lay = layout(tl.lanes);
    this.hover = null;
    this.groups = new Map();
    tl.events.row.forEach((_, i) => {
      const k = tl.events.lane[i] * 64 + tl.events.depth[i];
      if (!this.groups.has(k)) this.groups.set(k, []);
      this.groups.get(k).push(i);
    });
    this.rowIndex = new Map(tl.events.row.map((r, i) => [r, i]));
    // Bins (span mode) are items of several events: their count and busy time.
    this.merged = new Map((tl.merged?.index || []).map((i, k) => [i, k]));
    const keepRow = keepView && this.selectedRow >= 0 ? this.rowIndex.get(this.selectedRow) : undefined;
    this.highlight = focusRows.map((r) => this.rowIndex.get(r)).filter((i) => i !== undefined);
    this.selected = this.highlight.length ? this.highlight[0] : keepRow ?? null;
    if (this.highlight.length) this.zoomTo(this.highlight);
    else if (keepView) { [this.t0, this.t1] = keepView; this.draw(); }
    else this.fit(false);
    this.describe();
    // What is outlined, for tests and for anyone inspecting the page.
    this.root.dataset.highlight = this.highlight.map((i) => tl.events.row[i]).join(",");
    this.root.dataset.events = String(tl.shown);
  }

  themeChanged() {
    if (!this.tl) return;
    this.pal = palette();
    this.draw();
  }

  fit(refetch = true) {
    if (this.mode === "span" && refetch) {
      this.span.fit();
      return;
    }
    this.t0 = this.tl.range.start_us;
    this.t1 = this.tl.range.end_us;
    if (this.t1 <= this.t0) this.t1 = this.t0 + 1;
    this.draw();
  }

  /** Zoom so the events fill ~40% of the width, and scroll their lane into view. */
  zoomTo(indices) {
    const ev = this.tl.events;
    const s = Math.min(...indices.map((i) => ev.start_us[i]));
    const e = Math.max(...indices.map((i) => ev.start_us[i] + ev.dur_us[i]));
    const pad = Math.max((e - s) * 0.75, 5);
    this.t0 = Math.max(s - pad, this.tl.range.start_us);
    this.t1 = Math.min(e + pad, Math.max(this.tl.range.end_us, e));
    if (this.t1 - this.t0 < 2 * pad) this.t1 = this.t0 + 2 * pad + (e - s);
    const i = indices[0];
    this.draw();
    const y = this.lay.top[ev.lane[i]] + ev.depth[i] * ROW_H;
    this.scroll.scrollTop = Math.max(y - this.scroll.clientHeight / 3, 0);
  }

  x(t) {
    return LABEL_W + ((t - this.t0) / (this.t1 - this.t0)) * (this.W - LABEL_W - 6);
  }

  t(px) {
    return this.t0 + ((px - LABEL_W) / (this.W - LABEL_W - 6)) * (this.t1 - this.t0);
  }

  draw() {
    if (!this.tl) return;
    this.root.dataset.view = `${this.t0.toFixed(1)},${this.t1.toFixed(1)}`; // for tests and links
    const dpr = window.devicePixelRatio || 1;
    this.W = this.scroll.clientWidth;
    const H = this.lay.height;
    for (const [cv, hgt] of [[this.canvas, H], [this.axis, AXIS_H]]) {
      cv.width = Math.round(this.W * dpr);
      cv.height = Math.round(hgt * dpr);
      cv.style.width = `${this.W}px`;
      cv.style.height = `${hgt}px`;
    }
    const v = {
      W: this.W, H, pal: this.pal, lay: this.lay, x: (t) => this.x(t), t0: this.t0, t1: this.t1,
      hover: this.hover, selected: this.selected, highlight: this.highlight,
      focus: this.hover ?? this.selected, merged: this.merged,
      steps: this.tl.steps || null, selectedStep: this.span?.selected()?.step,
    };
    const ctx = this.canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    drawBody(ctx, this.tl, v);
    this.path.draw(ctx, v);
    const actx = this.axis.getContext("2d");
    actx.setTransform(dpr, 0, 0, dpr, 0, 0);
    if (this.tl.extent) drawAxis(actx, v, this.tl.extent.start_us, "time in span");
    else drawAxis(actx, v, this.tl.range.start_us);
    this.span?.drawStrip(dpr);
  }

  /** The event under (px, py) in canvas CSS pixels, with a few pixels' slack. */
  hit(px, py) {
    if (!this.tl || px < LABEL_W) return null;
    const lane = this.lay.top.findIndex((top, i) => py >= top && py < top + Math.max(this.tl.lanes[i].depth, 1) * ROW_H);
    if (lane < 0) return null;
    const depth = Math.floor((py - this.lay.top[lane]) / ROW_H);
    const group = this.groups.get(lane * 64 + depth);
    if (!group) return null;
    const ev = this.tl.events;
    const t = this.t(px);
    const slack = (3 * (this.t1 - this.t0)) / (this.W - LABEL_W);
    let lo = 0, hi = group.length - 1, best = null;
    while (lo <= hi) { // last event starting at or before t + slack
      const mid = (lo + hi) >> 1;
      if (ev.start_us[group[mid]] <= t + slack) { best = mid; lo = mid + 1; } else hi = mid - 1;
    }
    // The event under the pointer itself first, else the latest one within the slack.
    let near = null;
    for (let k = best; k !== null && k >= 0 && k > best - 50; k--) {
      const i = group[k];
      const s = ev.start_us[i], e = s + ev.dur_us[i];
      if (s <= t && t <= e) return i;
      if (near === null && e + slack >= t) near = i;
    }
    return near;
  }

  describe(i = this.selected) {
    const tl = this.tl;
    if (!tl) return;
    this.selectedRow = i === null || i === undefined ? undefined : tl.events.row[i];
    this.root.dataset.selectedRow = this.selectedRow === undefined ? "" : String(this.selectedRow);
    if (tl.mode === "span") {
      this.count.textContent = "";
      fill(this.info, this.span.describe(), i !== null && i !== undefined ? h("span", { class: "sel" }, this.label(i)) : null);
      return;
    }
    const parts = [`${tl.shown.toLocaleString()} of ${tl.total.toLocaleString()} events`];
    if (tl.shown < tl.total) parts.push("(the longest kept)");
    this.count.textContent = tl.shown < tl.total
      ? `shows ${tl.shown.toLocaleString()} of ${tl.total.toLocaleString()} events (the longest)`
      : `${tl.total.toLocaleString()} event${tl.total === 1 ? "" : "s"}`;
    const kids = [h("span", null, parts.join(" "))];
    if (i !== null && i !== undefined) kids.push(h("span", { class: "sel" }, this.label(i)));
    const path = this.path.describeLine();
    if (path) kids.push(path);
    kids.push(h("span", null, "shaded: outside this step's device window · wheel: zoom · drag: pan · double-click: fit"));
    this.info.replaceChildren(...kids);
  }

  label(i) {
    const ev = this.tl.events;
    const k = this.merged?.get(i);
    const n = k === undefined ? "" : `${this.tl.merged.count[k].toLocaleString()} events, mostly `;
    return `${n}${shortName(this.tl.names[ev.name[i]], 70)} · ${dur(ev.dur_us[i])}`;
  }

  showTip(i, px, py) {
    const tl = this.tl, ev = tl.events;
    const launches = tl.links.filter(([a]) => a === i).length;
    const by = tl.links.find(([, b]) => b === i);
    const k = this.merged?.get(i);
    const into = tl.mode === "span" ? "into the span" : "into the step";
    if (k !== undefined) { // a bin: several events too narrow to draw one by one
      fill(this.tip,
        h("div", { class: "m" }, `${tl.merged.count[k].toLocaleString()} events merged (each narrower than ${dur(tl.bin_us)})`),
        h("div", { class: "n" }, `mostly ${tl.names[ev.name[i]] || "(unnamed)"}`),
        h("div", { class: "m" }, `${tl.lanes[ev.lane[i]]?.label || "lane"} · busy ${dur(tl.merged.busy_us[k])} of ${dur(ev.dur_us[i])}`),
        h("div", { class: "m" }, `from ${dur(ev.start_us[i] - tl.range.start_us)} into the view · zoom in to see them one by one`));
      this.placeTip(px, py);
      return;
    }
    // fill(), not replaceChildren(): the optional lines are null when absent,
    // and replaceChildren would print them as the text "null".
    fill(this.tip,
      h("div", { class: "n" }, tl.names[ev.name[i]] || "(unnamed)"),
      h("div", { class: "m" }, `${KIND_WORD[ev.kind[i]] || ev.kind[i] || "event"} · ${tl.lanes[ev.lane[i]]?.label || "lane"}`),
      h("div", { class: "m" }, `duration ${dur(ev.dur_us[i])} · starts ${dur(ev.start_us[i] - (tl.extent || tl.range).start_us)} ${into}`),
      launches ? h("div", { class: "m" }, `launches ${launches} device activit${launches > 1 ? "ies" : "y"}`) : null,
      by ? h("div", { class: "m" }, `launched by ${shortName(tl.names[ev.name[by[0]]], 60)}`) : null,
      ev.clipped.includes(i) ? h("div", { class: "m" }, tl.mode === "span" ? "clipped to the view" : "clipped to the step's range") : null,
      this.path.tipLine(i));
    this.placeTip(px, py);
  }

  placeTip(px, py) {
    this.tip.hidden = false;
    const box = this.root.getBoundingClientRect();
    const left = px + 16 + 300 > box.width ? px - 320 : px + 16;
    this.tip.style.left = `${Math.max(left, 4)}px`;
    const top = AXIS_H + (this.mode === "span" ? this.span.strip.clientHeight : 0);
    this.tip.style.top = `${Math.min(py + top + 12 - this.scroll.scrollTop, box.height - 90)}px`;
  }

  zoom(factor, atPx) {
    const at = this.t(atPx ?? (LABEL_W + this.W) / 2);
    const minSpan = 0.5;
    const span = Math.max((this.t1 - this.t0) * factor, minSpan);
    const f = (at - this.t0) / (this.t1 - this.t0);
    this.t0 = at - f * span;
    this.t1 = this.t0 + span;
    this.draw();
    this.viewChanged();
  }

  /** A zoom or a pan: the step view's goes into the URL; the span view asks for detail. */
  viewChanged() {
    if (this.mode === "span") this.span.viewChanged();
    else this.onView?.(this.t0, this.t1);
  }

  /** Show [t0, t1] (µs, the timeline's own clock): a zoom restored from a shared link. */
  setView(t0, t1) {
    if (!this.tl || !(t1 > t0) || this.mode === "span") return;
    this.t0 = t0;
    this.t1 = t1;
    this.draw();
  }

  pan(px) {
    const dt = (px * (this.t1 - this.t0)) / (this.W - LABEL_W);
    this.t0 += dt;
    this.t1 += dt;
    this.draw();
    this.viewChanged();
  }

  bind() {
    const cv = this.canvas;
    const pos = (e) => { const r = cv.getBoundingClientRect(); return [e.clientX - r.left, e.clientY - r.top]; };
    cv.addEventListener("wheel", (e) => {
      if (!this.tl) return;
      e.preventDefault();
      if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) this.pan(e.deltaX || e.deltaY);
      else this.zoom(Math.exp(e.deltaY * 0.0015), pos(e)[0]);
    }, { passive: false });
    let drag = null;
    cv.addEventListener("mousedown", (e) => { drag = { x: e.clientX, y: e.clientY, moved: false, top: this.scroll.scrollTop }; });
    window.addEventListener("mouseup", () => { setTimeout(() => { drag = null; }, 0); });
    cv.addEventListener("mousemove", (e) => {
      if (!this.tl) return;
      const [px, py] = pos(e);
      if (drag && (e.buttons & 1)) {
        const dx = e.clientX - drag.x;
        if (Math.abs(dx) + Math.abs(e.clientY - drag.y) > 3) drag.moved = true;
        this.pan(-dx);
        drag.x = e.clientX;
        this.scroll.scrollTop = drag.top - (e.clientY - drag.y);
        this.tip.hidden = true;
        return;
      }
      const i = this.hit(px, py);
      if (i !== this.hover) { this.hover = i; this.draw(); }
      if (i === null) this.tip.hidden = true;
      else this.showTip(i, px, py);
      cv.style.cursor = i === null ? "grab" : "pointer";
    });
    cv.addEventListener("mouseleave", () => { this.hover = null; this.tip.hidden = true; this.draw(); });
    cv.addEventListener("click", (e) => {
      if (!this.tl || (drag && drag.moved)) return;
      this.selected = this.hit(...pos(e));
      this.describe();
      this.draw();
    });
    cv.addEventListener("dblclick", () => { if (this.tl) { this.fit(); if (this.mode === "step") this.onView?.(null); } });
    cv.addEventListener("keydown", (e) => {
      if (!this.tl) return;
      const k = e.key;
      const step = (this.W - LABEL_W) / 8;
      if (k === "+" || k === "=" || k === "w") this.zoom(0.7);
      else if (k === "-" || k === "s") this.zoom(1 / 0.7);
      else if (k === "ArrowLeft" || k === "a") this.pan(-step);
      else if (k === "ArrowRight" || k === "d") this.pan(step);
      else if (k === "0") { this.fit(); if (this.mode === "step") this.onView?.(null); }
      else if (this.mode === "span" && (k === "[" || k === "]" || k === "Enter")) { if (!this.span.onKey(k)) return; }
      else return;
      e.preventDefault();
    });
  }
}
