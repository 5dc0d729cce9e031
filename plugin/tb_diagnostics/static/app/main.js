// The tab's controller: picks the span, loads its summary, then the selected
// step's detail, and wires the views to each other (a step in the chart or
// table → tree + timeline; a finding's evidence → the timeline).

import { getJSON, isAbort } from "./api.js";
import { CompareView, deviceLabel } from "./compare.js";
import { card, fill, h, shownName } from "./dom.js";
import { FindingsView } from "./findings.js";
import { RanksView } from "./heatmap.js";
import { VERDICT_HELP, bytes, stepLabel, verdictColor } from "./format.js";
import { listenForReload } from "./ipc.js";
import { Picker } from "./picker.js";
import { KEYS, onStateChange, readState, writeState } from "./state.js";
import { RooflineView } from "./roofline.js";
import { emptyState, loadingState, problemState, showMissingRun, spanErrorState } from "./states.js";
import { StepChart, legend } from "./stepchart.js";
import { StepTable } from "./steptable.js";
import { watchTheme } from "./theme.js";
import { TimelineView } from "./timeline.js";
import { TreeView } from "./tree.js";
import { WhatIfView } from "./whatif.js";
import { mountViews, tellViews } from "./views.js";

const KIND_LEGEND = [["op", "op"], ["runtime", "launch"], ["kernel", "kernel"], ["memcpy", "copy"], ["annotation", "annotation"]];

export class App {
  constructor(root) {
    this.root = root;
    this.state = readState();
    this.summary = null;
    this.stepIndex = -1;
    this.ctl = {};
    this.build();
  }

  build() {
    this.pickerEl = h("div", { class: "picker" });
    this.device = h("span", { class: "device" });
    this.status = h("span", { class: "status", role: "status" });
    this.picker = new Picker(this.pickerEl, { onChange: (sel) => this.pick(sel) });
    this.headline = h("div", { class: "headline", id: "headline", hidden: true });
    this.main = h("div", { id: "main" });

    const steps = card("Steps", { id: "steps", tools: (this.legend = legend()) });
    steps.body.style.cssText = "display:flex;flex-direction:column;overflow:hidden";
    const chartEl = h("div", { class: "chart", id: "step-chart" });
    const tableEl = h("div", { style: { flex: "1", minHeight: "0", overflow: "auto" } });
    steps.body.append(chartEl, tableEl);
    this.chart = new StepChart(chartEl, { onSelect: (i) => this.selectStep(i), legend: this.legend });
    this.table = new StepTable(tableEl, { onSelect: (i) => this.selectStep(i) });

    const findings = card("Findings", { id: "findings" });
    // Run-level findings (distributed runs) come with the ranks (/run) and open a rank's step.
    this.findings = new FindingsView(findings.body, {
      onEvidence: (f, e) => this.showEvidence(f, e), onCell: (c) => this.ranks.openCell(c),
      onToggle: (key) => this.setState({ finding: key }), countEl: findings.head.querySelector(".card-tools"),
    });

    // Each change the backend can replay: the median step before and after; a rule opens its finding.
    const whatif = card("What if", { id: "whatif" });
    this.whatif = new WhatIfView(whatif.body, whatif.head.querySelector(".card-tools"), { onFinding: (key) => this.openFinding(key) });

    // Every op group against the device's ceilings; a point opens the op's first call.
    const roof = card("Roofline", { id: "roofline" });
    this.roofline = new RooflineView(roof.body, roof.head.querySelector(".card-tools"), { onOpen: (op) => this.openOp(op) });
    this.views = mountViews(this); // Operators, Kernels, Memory, Modules (views.js)

    const tree = card("Dispatch chain", { id: "tree" });
    this.treeTools = tree.head.querySelector(".card-tools");
    this.tree = new TreeView(tree.body, { onShow: (n) => this.showNode(n) });

    const zoom = (f) => () => this.timeline.tl && this.timeline.zoom(f);
    const tl = card("Timeline", {
      id: "timeline",
      tools: [h("span", { class: "legend", style: { padding: 0 } }, KIND_LEGEND.map(([k, label]) =>
        h("span", null, h("i", { style: { background: `var(--k-${k})` } }), label))),
      h("span", { class: "tools" },
        h("button", { onclick: zoom(1 / 0.6), title: "zoom out (-)" }, "−"),
        h("button", { onclick: zoom(0.6), title: "zoom in (+)" }, "+"),
        h("button", { onclick: () => this.timeline.tl && this.timeline.fit(), title: "fit the step (0)" }, "fit"))],
    });
    tl.body.style.cssText = "display:flex;flex-direction:column;overflow:hidden";
    const tlEl = h("div", { style: { flex: "1", minHeight: "0" } });
    const info = h("div", { class: "tl-info" });
    tl.body.append(tlEl, info);
    this.timeline = new TimelineView(tlEl, info, this);
    // The zoom goes into the URL so a shared link opens the same view (state.js).
    this.timeline.onView = (t0, t1) => this.setState({ zoom: t0 === null ? null : `${t0.toFixed(1)},${t1.toFixed(1)}` });

    this.grid = h("div", { class: "grid" }, steps.el, findings.el, whatif.el, roof.el, ...this.views.map((v) => v.el), tree.el, tl.el);
    this.bodies = { tree: tree.body, timeline: tlEl };
    // Distributed runs: the ranks × steps heat map; a cell opens that rank's step.
    this.ranks = new RanksView({ onOpen: (rank, cell) => this.openRankStep(rank, cell), onFindings: (list) => this.findings.setRun(list) });
    // Two runs side by side: the selected one against a baseline picked here.
    this.compare = new CompareView({ onPick: (run) => { this.setState({ compare: run }); this.loadCompare(); } });
    this.root.replaceChildren(
      h("div", { class: "topbar" }, this.pickerEl, this.device, this.status),
      this.headline, this.ranks.el, this.compare.el, this.main);
    watchTheme(() => {
      this.chart.build();
      this.roofline.build();
      tellViews(this.views, "build");
      this.timeline.themeChanged();
    });
    listenForReload(() => this.loadRuns(true));
    onStateChange((want, named) => {
      // Back on the tab with a bare "#diagnostics": put the view's state back, open nothing else.
      if (named) this.route(want);
      else writeState(this.state);
    });
  }

  /** A URL hash edited by hand or a pasted link: open what it names. */
  route(want) {
    if (KEYS.every((k) => (want[k] ?? null) === (this.state[k] ?? null))) return;
    this.state = want;
    if (!this.runs || this.runs.status !== "ok") {
      this.loadRuns();
      return;
    }
    const sel = this.picker.setRuns(this.runs.runs, want);
    if (sel.missing) return showMissingRun(this, sel); // says so, offers the first
    const sameSpan = this.summary && this.file && sel.file.file === this.file.file;
    this.setState({ run: sel.run, worker: sel.worker, span: sel.span });
    this.file = sel.file;
    if (sel.run !== this.ranksRun) this.loadRun(sel.run);
    this.loadCompare();
    // Same span: redraw from the state (step, open finding, zoom) without a reload.
    if (sameSpan) this.showSummary(this.summary);
    else this.loadSpan();
  }

  setState(patch) { Object.assign(this.state, patch); writeState(this.state); }

  /** A fresh signal for the request kind `name`, aborting the one before. */
  abort(name) { this.ctl[name]?.abort(); return (this.ctl[name] = new AbortController()).signal; }

  // ---- runs ---------------------------------------------------------------
  async loadRuns(reload = false) {
    let runs;
    try {
      runs = await getJSON("runs");
    } catch (e) {
      this.status.textContent = `cannot reach the plugin: ${e.message}`;
      return;
    }
    this.runs = runs;
    if (runs.status === "scanning") {
      fill(this.main, loadingState(null));
      setTimeout(() => this.loadRuns(reload), 500);
      return;
    }
    if (runs.status !== "ok") {
      this.headline.hidden = true;
      this.pickerEl.hidden = true;
      fill(this.main, runs.status === "empty" ? emptyState(runs) : problemState(runs));
      document.body.dataset.ready = "empty";
      return;
    }
    this.pickerEl.hidden = false;
    const sel = this.picker.setRuns(runs.runs, this.state);
    if (sel.missing) return showMissingRun(this, sel);
    const same = this.file && this.file.file === sel.file.file && this.file.mtime === sel.file.mtime &&
      this.file.size === sel.file.size;
    if (!reload || !same) this.pick(sel);
  }

  pick(sel) {
    const changed = sel.run !== this.state.run || sel.worker !== this.state.worker || sel.span !== this.state.span;
    // Another run picked here: the baseline was chosen for the old one (a shared
    // link, this.file still unset, keeps its own).
    const otherRun = sel.run !== this.state.run && this.file;
    this.setState({
      run: sel.run, worker: sel.worker, span: sel.span,
      ...(changed && this.file ? { step: null, finding: null, zoom: null } : {}),
      ...(otherRun ? { compare: null } : {}),
    });
    this.file = sel.file;
    if (sel.run !== this.ranksRun) this.loadRun(sel.run);
    if (sel.run !== this.compareRun) this.loadCompare();
    this.loadSpan();
  }

  // ---- compare (the selected run against a baseline run) -------------------
  async loadCompare() {
    const run = this.state.run;
    const runs = this.runs?.runs || [];
    // Only a run of this log dir other than the candidate: a stale or foreign baseline is dropped.
    const valid = this.state.compare && this.state.compare !== run && runs.some((r) => r.run === this.state.compare);
    if (this.state.compare && !valid) this.setState({ compare: null });
    const baseline = valid ? this.state.compare : null;
    this.compareRun = run;
    this.compare.setRuns(runs, run, baseline);
    const signal = this.abort("compare");
    if (!baseline) return;
    this.compare.loading(null);
    try {
      const res = await getJSON("compare", { baseline, candidate: run }, {
        signal, onProgress: (p) => this.compare.loading(p),
      });
      if (this.state.run === run) this.compare.show(res);
    } catch (e) {
      if (!isAbort(e)) this.compare.error(e.message);
    }
  }

  // ---- run (distributed: every rank) --------------------------------------
  async loadRun(run) {
    this.ranksRun = run;
    const signal = this.abort("run");
    this.ranks.setData(null);
    try {
      const res = await getJSON("run", { run }, { signal });
      if (res.status === "ready" && this.ranksRun === run) this.ranks.setData(res);
    } catch (e) {
      if (!isAbort(e)) this.ranks.setData(null);
    }
  }

  openRankStep(rank, cell) {
    this.setState({ worker: rank.worker, span: cell.span || rank.span });
    this.pick(this.picker.setRuns(this.runs.runs, this.state));
    this.setState({ step: String(cell.step) }); // after pick, which clears it on a change
  }

  // ---- span ---------------------------------------------------------------
  async loadSpan() {
    const signal = this.abort("span");
    this.abort("step");
    const { run, worker, span } = this.state;
    this.headline.hidden = true;
    fill(this.main, loadingState(null));
    document.body.dataset.ready = "loading";
    let res;
    try {
      res = await getJSON("span", { run, worker, span }, {
        signal, onProgress: (p) => fill(this.main, loadingState(p)),
      });
    } catch (e) {
      if (isAbort(e)) return;
      fill(this.main, spanErrorState({ file: `${run}/${worker}.${span}`, error: e.message }, []));
      return;
    }
    if (res.status === "error") {
      const others = (this.runs?.errors || []).filter((x) => x.file !== res.file);
      fill(this.main, spanErrorState(res, others));
      this.device.textContent = "";
      document.body.dataset.ready = "error";
      return;
    }
    this.showSummary(res.summary);
  }

  showSummary(s) {
    // A span of very many steps arrives with a chosen subset (steps_total says how many
    // there are): the chart, the table and the selection all count rows by position, and
    // the step route asks by step number, so positions are the indices here.
    s.steps.forEach((x, i) => { x.index = i; });
    this.summary = s;
    const dev = s.device.kind === "cpu" ? "CPU only" : deviceLabel(s.device);
    this.device.title = shownName(`${s.file} · ${bytes(this.file?.size)}`);
    this.device.textContent = `${dev} · ${s.trace.events.toLocaleString()} events · ${s.steps_total ? `${s.steps.length.toLocaleString()} of ${s.steps_total.toLocaleString()} steps` : `${s.steps.length} step${s.steps.length === 1 ? "" : "s"}`}`;
    const bad = (this.runs?.errors || []).length;
    this.status.textContent = bad ? `${bad} file${bad > 1 ? "s" : ""} could not be read` : "";
    this.status.title = shownName((this.runs?.errors || []).map((e) => e.message).join("\n"));
    fill(this.headline,
      s.verdict ? h("span", { class: "chip", style: { "--chip": verdictColor(s.verdict) }, title: VERDICT_HELP[s.verdict] }, s.verdict) : null,
      h("div", null,
        h("div", { class: "sentence", id: "headline-text" }, capitalise(s.headline)),
        [...s.errors, ...s.notes].length ? h("div", { class: "notes" }, [...s.errors, ...s.notes].join(" · ")) : null));
    this.headline.style.setProperty("--verdict", verdictColor(s.verdict));
    this.headline.hidden = false;
    fill(this.main, this.grid);
    this.findings.setData(s, this.state.finding); // it opens the finding only if it has it
    this.whatif.setData(s);
    this.compare.setDevice(s.device); // same-device baselines first, the others marked
    this.roofline.setData(s);
    tellViews(this.views, "setSpan", s);
    const index = this.defaultStep(s);
    this.stepIndex = -1;
    this.chart.setData(s.steps, index);
    this.table.setData(s.steps, index);
    // The tab's own pick: the What-if card keeps each change's named step till one is chosen.
    this.selectStep(index, { chosen: false });
    // For bench/run_paint.py: when the summary (headline, steps, findings) is on screen.
    requestAnimationFrame(() => performance.mark("tbd-summary-painted"));
  }

  defaultStep(s) {
    const want = this.state.step;
    const byNumber = s.steps.find((x) => (x.step === null ? "all" : String(x.step)) === want);
    if (byNumber) return byNumber.index;
    const typical = s.steps.find((x) => x.verdict === s.verdict && !(x.flags || []).length);
    return (typical || s.steps[0] || { index: 0 }).index;
  }

  // ---- step ---------------------------------------------------------------
  selectStep(index, { highlight = [], focus = [], reveal = false, chosen = true } = {}) {
    const st = this.summary?.steps[index];
    if (!st) return;
    const stepChanged = index !== this.stepIndex;
    // Another step's clock differs: a zoom only survives the first (URL-restored) load.
    if (stepChanged && this.stepIndex !== -1) this.state.zoom = null;
    this.stepIndex = index;
    this.chart.select(index);
    this.table.select(index);
    this.whatif.select(chosen ? st.step : null);
    tellViews(this.views, "selectStep", st);
    this.setState({ step: st.step === null ? "all" : String(st.step) });
    clearTimeout(this.stepTimer);
    // Arrow keys in the table step quickly: fetch only once the user pauses.
    this.stepTimer = setTimeout(() => this.loadStep(index, stepChanged, highlight, focus, reveal), stepChanged ? 120 : 0);
  }

  async loadStep(index, stepChanged, highlight, focus, reveal) {
    const signal = this.abort("step");
    const st = this.summary.steps[index];
    const { run, worker, span } = this.state;
    const params = { run, worker, span, step: st.step === null ? "all" : st.step };
    if (highlight.length) params.highlight = highlight.slice(0, 64).join(",");
    this.treeTools.textContent = `step ${stepLabel(st.step)}`;
    if (stepChanged) fill(this.bodies.tree, loadingState(null));
    let res;
    try {
      res = await getJSON("step", params, { signal, onProgress: (p) => stepChanged && fill(this.bodies.tree, loadingState(p)) });
    } catch (e) {
      if (isAbort(e)) return;
      fill(this.bodies.tree, h("div", { class: "none" }, `Cannot load step ${stepLabel(st.step)}: ${e.message}`));
      return;
    }
    if (res.status !== "ready") {
      fill(this.bodies.tree, h("div", { class: "none" }, res.error || "cannot load this step"));
      return;
    }
    if (stepChanged || !this.tree.tree) this.tree.setData(res.tree, res.open, res.critical_path);
    // Open the dispatch chain at the first highlighted call (the server finds its node).
    if (reveal && res.highlight_path?.length) this.tree.reveal(res.tree, res.highlight_path);
    this.timeline.setData(res.timeline, focus, res.critical_path);
    if (this.state.zoom && !focus.length) this.timeline.setView(...this.state.zoom.split(",").map(Number));
    document.body.dataset.ready = "true";
    requestAnimationFrame(() => performance.mark("tbd-step-painted"));
  }

  /** A finding's evidence: open the step that holds the event, outline it in the timeline. */
  showEvidence(f, e) {
    const steps = this.summary.steps;
    const onDevice = ["kernel", "memcpy", "memset", "gpu_annotation", "gpu_sync"].includes(e.category);
    // Host events belong to the step whose host window holds them, device
    // activities to the step whose device window does (it can run past the
    // host's step boundary).
    const lo = (s) => (onDevice ? s.start_us : s.host_start_us);
    const hi = (s) => (onDevice ? s.start_us + s.wall_us : s.host_end_us);
    const holds = (s, ts) => ts >= lo(s) && ts < hi(s);
    const st = steps.find((s) => holds(s, e.ts)) ||
      steps.find((s) => ts0(s) <= e.ts && e.ts < ts1(s)) ||
      steps.find((s) => (f.steps || []).includes(s.step)) || steps[this.stepIndex];
    const rows = [e.row, ...f.evidence.filter((x) => ts0(st) <= x.ts && x.ts < ts1(st)).map((x) => x.row)];
    this.selectStep(st.index, { highlight: [...new Set(rows)], focus: [e.row] });
    revealTimeline();
  }

  /** A roofline op: its first call's step, the call in the timeline and in the dispatch chain. */
  openOp(op) {
    const steps = this.summary.steps;
    const st = steps.find((s) => s.step === (op.steps || [])[0]) || steps[this.stepIndex];
    if (!st || !op.rows?.length) return;
    const rows = op.rows.filter((r, i) => op.steps[i] === st.step);
    this.selectStep(st.index, { highlight: rows.length ? rows : [op.rows[0]], focus: [op.rows[0]], reveal: true });
    revealTimeline();
  }

  /** A finding opened from another card (a what-if projection's rule). */
  openFinding(key) {
    this.findings.select(key);
    this.setState({ finding: key });
  }

  showNode(n) {
    this.tree.mark(n.id);
    this.selectStep(this.stepIndex, { highlight: n.rows, focus: n.rows });
  }
}

/** Scroll the timeline card into view unless enough of it is visible already. */
function revealTimeline() {
  const el = document.getElementById("timeline");
  if (!el) return;
  const r = el.getBoundingClientRect();
  const visible = Math.min(r.bottom, window.innerHeight) - Math.max(r.top, 0);
  if (visible < 180) el.scrollIntoView({ block: "nearest", behavior: "smooth" });
}

/** The time range a step's timeline covers: its host and its device window. */
const ts0 = (s) => Math.min(s.host_start_us, s.start_us);
const ts1 = (s) => Math.max(s.host_end_us, s.start_us + s.wall_us);

function capitalise(s) {
  return s ? s[0].toUpperCase() + s.slice(1) : "";
}
