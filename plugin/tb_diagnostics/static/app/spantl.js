// The timeline card's "whole span" mode and its "Open in Perfetto" links.
//
// The server decides the level of detail (analysis/span_timeline.py): each zoom or pan
// asks /timeline for the visible range at the canvas's width (debounced, the stale
// request aborted), and gets at most ~5,000 items: events a pixel wide or more, the rest
// merged per lane row into one-pixel bins. A strip above the lanes shows the steps:
// clicking one (or [ and ], or Enter for the step in the middle) selects it in the tab.
// The links download the span or the selected step as Chrome-trace JSON from the plugin
// itself; the tab never loads anything from the network.

import { getJSON, isAbort } from "./api.js";
import { fill, h } from "./dom.js";
import { stepLabel } from "./format.js";
import { queryString } from "./names.js";
import { LABEL_W, drawStrip } from "./tldraw.js";

export const STRIP_H = 20;
const DEBOUNCE_MS = 150;

export class SpanMode {
  constructor(view, app) {
    this.view = view;
    this.app = app;
    this.data = null;
    this.key = null;
    // "tl-axis" too: styled as the axis, and not the timeline's canvas for selectors.
    this.strip = h("canvas", { class: "tl-axis tl-strip", "aria-hidden": "true" });
    this.strip.style.cssText = "display:none;flex:none;cursor:pointer";
    view.root.insertBefore(this.strip, view.scroll);
    this.strip.addEventListener("click", (e) => {
      const r = this.strip.getBoundingClientRect();
      const st = this.stepAt(this.view.t(e.clientX - r.left));
      if (st) this.open(st);
    });
    this.modeSel = h("select", { "aria-label": "timeline of", class: "tl-mode", onchange: (e) => this.setMode(e.target.value) },
      h("option", { value: "step" }, "this step"), h("option", { value: "span" }, "whole span"));
    this.stepLink = h("a", { download: "", title: "the selected step as a Chrome-trace file: open it at ui.perfetto.dev" }, "step");
    this.spanLink = h("a", { download: "", title: "the whole span as a Chrome-trace file (gzipped JSON): open it at ui.perfetto.dev" }, "span");
    this.links = h("span", { class: "tl-export", style: { whiteSpace: "nowrap" }, title: "download, then open the file at ui.perfetto.dev (Open trace file)" },
      "Open in Perfetto: ", this.stepLink, (this.sep = h("span", null, " · ")), this.spanLink);
    const tools = view.root.closest(".card")?.querySelector(".card-tools");
    tools?.prepend(this.modeSel, this.links);
  }

  get on() {
    return this.view.mode === "span";
  }

  spanKey() {
    const { run, worker, span } = this.app.state;
    return JSON.stringify([run, worker, span]);
  }

  /** The selected step's entry of the summary (null before one is). */
  selected() {
    return this.app.summary?.steps[this.app.stepIndex] || null;
  }

  /** `fetch` false: a span not loaded yet is left to the caller (setData → stepChanged). */
  setMode(mode, { fetch = true } = {}) {
    const v = this.view;
    v.mode = mode;
    this.modeSel.value = mode;
    this.strip.style.display = mode === "span" ? "block" : "none";
    v.root.dataset.mode = mode;
    // In the URL (state.js): a shared link opens the same view.
    this.app.setState({ timeline: mode === "span" ? "span" : null });
    if (mode === "span") {
      if (this.data && this.key === this.spanKey()) v.show(this.data, [], this.savedView);
      else if (fetch) this.load(null);
    } else {
      this.savedView = this.data ? [v.t0, v.t1] : null;
      this.abort?.abort();
      if (v.stepData) v.show(v.stepData, v.stepFocus || []);
    }
  }

  /** The mode the URL names (a shared link, a pasted hash), as a step's timeline arrives. */
  follow() {
    const want = this.app.state.timeline === "span" ? "span" : "step";
    if (want !== this.view.mode) this.setMode(want, { fetch: false });
  }

  /** A step was selected elsewhere (or the span changed) while the span is shown. */
  stepChanged() {
    this.updateLinks();
    if (!this.on) return;
    if (this.key !== this.spanKey()) {
      this.data = null;
      this.load(null);
      return;
    }
    const st = this.selected();
    const v = this.view;
    if (st && v.tl) {
      const [s, e] = [Math.min(st.host_start_us, st.start_us), Math.max(st.host_end_us, st.start_us + st.wall_us)];
      if (s < v.t0 || e > v.t1) { // out of view: show it with a margin
        const pad = (e - s) * 0.1 || 1;
        v.t0 = s - pad;
        v.t1 = e + pad;
        this.viewChanged();
      }
      v.draw();
    }
    v.describe();
  }

  updateLinks() {
    const { run, worker, span } = this.app.state;
    const st = this.selected();
    this.spanLink.href = `./chrome_trace${queryString({ run, worker, span })}`;
    const stepped = st && st.step !== null;
    this.stepLink.hidden = !stepped;
    this.sep.hidden = !stepped;
    if (stepped) {
      this.stepLink.href = `./chrome_trace${queryString({ run, worker, span, step: st.step })}`;
      this.stepLink.textContent = `step ${stepLabel(st.step)}`;
    }
  }

  fit() {
    if (!this.data) return;
    this.view.t0 = this.data.extent.start_us;
    this.view.t1 = this.data.extent.end_us;
    this.view.draw();
    this.viewChanged();
  }

  viewChanged() {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.load([this.view.t0, this.view.t1]), DEBOUNCE_MS);
  }

  /** Ask for `range` ([t0, t1], clamped to the span; null: all of it) at the canvas's width. */
  async load(range) {
    this.abort?.abort();
    const abort = (this.abort = new AbortController());
    const v = this.view;
    const { run, worker, span } = this.app.state;
    const key = this.spanKey();
    const width = Math.min(Math.max(Math.round((v.scroll.clientWidth || 1200) - LABEL_W - 6), 50), 8000);
    const p = { run, worker, span, width };
    if (range && this.data && this.key === key) {
      const ext = this.data.extent;
      const t0 = Math.max(range[0], ext.start_us), t1 = Math.min(range[1], ext.end_us);
      if (t1 > t0) Object.assign(p, { t0: t0.toFixed(3), t1: t1.toFixed(3) });
    }
    v.root.dataset.spanState = "loading";
    let res;
    try {
      res = await getJSON("timeline", p, { signal: abort.signal });
    } catch (e) {
      if (isAbort(e)) return;
      v.root.dataset.spanState = "error";
      fill(v.info, h("span", null, `Cannot load the span's timeline: ${e.message}`));
      return;
    }
    if (abort !== this.abort || !this.on) return;
    if (res.status !== "ready") {
      v.root.dataset.spanState = "error";
      fill(v.info, h("span", null, res.error || "cannot load the span's timeline"));
      return;
    }
    const first = !this.data || this.key !== key;
    this.data = res;
    this.key = key;
    // The first answer is the whole span, fitted; later ones keep the user's view.
    v.show(res, [], first ? null : [v.t0, v.t1]);
    v.root.dataset.spanState = "ready";
    v.root.dataset.spanItems = String(res.shown);
  }

  stepAt(t) {
    const steps = this.view.tl?.steps || [];
    return steps.find((s) => t >= s.start_us && t < s.end_us) ||
      steps.find((s) => t >= s.host_start_us && t < s.host_end_us) || null;
  }

  /** Select a step of the strip in the whole tab (chart, table, tree, links). */
  open(band) {
    const steps = this.app.summary?.steps || [];
    const st = steps.find((s) => s.step === band.step);
    if (st) this.app.selectStep(st.index);
  }

  /** [ and ]: the previous and next step; Enter: the step in the middle of the view. */
  onKey(k) {
    const steps = this.app.summary?.steps || [];
    if (k === "Enter") {
      const band = this.stepAt((this.view.t0 + this.view.t1) / 2);
      if (band) this.open(band);
      return Boolean(band);
    }
    const at = steps.indexOf(this.selected());
    const next = steps[at + (k === "]" ? 1 : -1)];
    if (next) this.app.selectStep(next.index);
    return true;
  }

  drawStrip(dpr) {
    const v = this.view;
    if (!this.on || !v.tl) return;
    const cv = this.strip;
    cv.width = Math.round(v.W * dpr);
    cv.height = Math.round(STRIP_H * dpr);
    cv.style.width = `${v.W}px`;
    cv.style.height = `${STRIP_H}px`;
    const ctx = cv.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    const st = this.selected();
    drawStrip(ctx, { W: v.W, pal: v.pal, x: (t) => v.x(t) }, v.tl.steps || [], st ? st.step : undefined, STRIP_H);
    v.root.dataset.selectedStep = st ? String(st.step) : "";
  }

  /** The info line in span mode. */
  describe() {
    const tl = this.view.tl;
    const merged = tl.merged.count.reduce((a, b) => a + b, 0);
    const parts = [`${tl.total.toLocaleString()} events in view`];
    parts.push(merged ? `${tl.single.toLocaleString()} drawn singly, ${merged.toLocaleString()} merged into ${tl.merged.index.length.toLocaleString()} blocks of ${binLabel(tl.bin_us)}` : "every one drawn");
    if (tl.dropped.too_deep) parts.push(`${tl.dropped.too_deep.toLocaleString()} nested too deep to draw`);
    return [h("span", null, parts.join(" · ")),
      h("span", null, "click a step (or [ ] and Enter) to select it · wheel: zoom · drag: pan · double-click: the whole span")];
  }
}

function binLabel(us) {
  return us >= 1000 ? `${+(us / 1000).toPrecision(3)} ms` : `${+us.toPrecision(3)} µs`;
}
