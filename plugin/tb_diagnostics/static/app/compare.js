// The compare view: the selected run (candidate) against another run of the log
// dir (baseline), from the /compare route — the same document as
// `tb-diagnostics compare --format json`. Steps are paired by position among the
// warm steps, since step numbers depend on each run's profiler schedule.

import { getJSON } from "./api.js";
import { card, fill, h } from "./dom.js";
import { dur, verdictColor } from "./format.js";

const KIND_NAMES = { cpu: "CPU", cuda: "CUDA", rocm: "ROCm" };

/** "CPU", "CUDA · NVIDIA A100-SXM4-40GB": a device as the picker names it. */
export function deviceLabel(d) {
  if (!d || !d.kind) return "";
  const kind = KIND_NAMES[d.kind] || d.kind.toUpperCase();
  return d.kind === "cpu" ? kind : `${kind}${d.name ? ` · ${d.name}` : ""}`;
}

/**
 * A run's device: that of its first span with one (null: none known). /runs gives each
 * span's device before any load, from the file's header, and the analysis' once loaded.
 */
function runDevice(r) {
  for (const w of r?.workers || []) for (const s of w.spans || []) if (s.device) return s.device;
  return null;
}

/** Why a run's device is not known (/runs' device_note of its first span that has one). */
function runDeviceNote(r) {
  for (const w of r?.workers || []) for (const s of w.spans || []) if (s.device_note) return s.device_note;
  return null;
}

/** The option's tooltip: where its device was read from, or why it is not known. */
function deviceTitle(o) {
  if (!o.device) return o.note ? `device unknown: ${o.note}` : "device unknown";
  if (o.device.from === "header") return `from the file's header: ${o.device.why}`;
  if (o.device.from === "trace") return "from the whole file (a small trace)";
  return "from the run's analysis";
}

/** Whether two devices are the same kind of device (and the same model, where both are named). */
export function sameDevice(a, b) {
  return a.kind === b.kind && (!a.name || !b.name || a.name === b.name);
}

/**
 * The baseline picker's options for the run `current` on `device` (null: the analysis'
 * is not in yet: the run's own from /runs, read from its file's header): runs on the same
 * device first; the others after, each marked with its device ("other device: CPU"), so a
 * CPU run is never offered as a GPU run's baseline unmarked; runs whose device is not
 * known last, marked so. Each option's title says where its device was read.
 */
export function baselineOptions(runs, current, device) {
  const mine = device || runDevice(runs.find((r) => r.run === current));
  const others = runs.filter((r) => r.run !== current)
    .map((r) => ({ run: r.run, device: runDevice(r), note: runDeviceNote(r) }));
  const option = (o, label, group) => ({ run: o.run, label, group, title: deviceTitle(o) });
  if (!mine) return others.map((o) => option(o, o.run, "any"));
  const unknownLabel = (o) => (o.note === "not read yet" ? "device not read yet" : "device unknown");
  return [
    ...others.filter((o) => o.device && sameDevice(o.device, mine)).map((o) => option(o, o.run, "same")),
    ...others.filter((o) => o.device && !sameDevice(o.device, mine))
      .map((o) => option(o, `${o.run} (other device: ${deviceLabel(o.device)})`, "other")),
    ...others.filter((o) => !o.device).map((o) => option(o, `${o.run} (${unknownLabel(o)})`, "unknown")),
  ];
}

function change(x) {
  if (x === null || x === undefined || Number.isNaN(x)) return "—";
  const sign = x > 0 ? "+" : x < 0 ? "−" : "±";
  return `${sign}${Math.abs(x * 100).toFixed(Math.abs(x) < 0.1 ? 1 : 0)}%`;
}

function delta(us) {
  if (us === null || us === undefined) return "—";
  return `${us > 0 ? "+" : us < 0 ? "−" : "±"}${dur(Math.abs(us))}`;
}

const chip = (v) => (v ? h("span", { class: "chip small", style: { "--chip": verdictColor(v) } }, v) : "—");

export class CompareView {
  constructor({ onPick }) {
    this.select = h("select", { "aria-label": "compare with run", onchange: () => onPick(this.select.value || null) });
    const c = card("Compare", { id: "compare", tools: h("label", { class: "compare-pick" }, "baseline ", this.select) });
    this.el = c.el;
    this.body = c.body;
    this.el.hidden = true;
  }

  /** The runs one can compare with (all but the current one); hidden when there are none. */
  setRuns(runs, current, baseline) {
    this.runs = runs;
    if (current !== this.current) this.device = null; // another run: its device is not known yet
    this.current = current;
    this.renderOptions(baseline);
    // Nothing picked: only the card's header (a one-line control) shows.
    if (!this.select.value) fill(this.body);
    this.body.hidden = !this.select.value;
  }

  /**
   * The candidate's device (from its span's summary): same-device runs go first. The run
   * list is asked again, since the plugin knows the devices of the spans loaded since.
   */
  async setDevice(device) {
    this.device = device;
    const current = this.current;
    try {
      const res = await getJSON("runs");
      if (res.status === "ok" && this.current === current) this.runs = res.runs;
    } catch {
      /* the list we have still holds */
    }
    if (this.current === current) this.renderOptions(this.select.value || null);
  }

  renderOptions(baseline) {
    const runs = this.runs || [];
    const opts = baselineOptions(runs, this.current, this.device);
    this.el.hidden = !opts.length;
    const mine = deviceLabel(this.device || runDevice(runs.find((r) => r.run === this.current)));
    const group = (g, label) => {
      const items = opts.filter((o) => o.group === g)
        .map((o) => h("option", { value: o.run, title: o.title, dataset: { device: g } }, o.label));
      return !items.length ? null : label ? h("optgroup", { label }, items) : items;
    };
    fill(this.select, h("option", { value: "" }, "— pick a run —"),
      group("any", null), group("same", `same device${mine ? ` (${mine})` : ""}`),
      group("other", "other devices"), group("unknown", "device unknown"));
    this.select.value = opts.some((o) => o.run === baseline) ? baseline : "";
  }

  loading(progress) {
    this.body.hidden = false;
    fill(this.body, h("div", { class: "muted" }, progress ? `loading ${progress.file}…` : "comparing…"));
  }

  error(message) {
    fill(this.body, h("div", { class: "problem" }, message));
  }

  show(doc) {
    const b = doc.baseline;
    const c = doc.candidate;
    const better = doc.median_warm_wall_change !== null && doc.median_warm_wall_change < 0;
    const head = h("div", { class: "compare-head", id: "compare-summary" },
      h("span", null, "median warm step "),
      h("b", null, dur(b.median_warm_wall_us)), " → ", h("b", null, dur(c.median_warm_wall_us)),
      h("span", { class: `compare-change ${better ? "better" : "worse"}` }, ` (${change(doc.median_warm_wall_change)})`),
      h("span", null, " · verdict "), chip(b.verdict), " → ", chip(c.verdict));
    const rows = doc.steps.map((s) => h("tr", null,
      h("td", null, String(s.position + 1)),
      h("td", null, s.baseline_step ?? "—"), h("td", null, s.candidate_step ?? "—"),
      h("td", { class: "num" }, dur(s.baseline_wall_us)), h("td", { class: "num" }, dur(s.candidate_wall_us)),
      h("td", { class: "num" }, delta(s.wall_delta_us)), h("td", { class: "num" }, delta(s.device_busy_delta_us)),
      h("td", null, s.verdict_changed ? [chip(s.baseline_verdict), " → ", chip(s.candidate_verdict)] : chip(s.candidate_verdict))));
    const table = h("table", { class: "compare-steps" },
      h("thead", null, h("tr", null, ["warm step", "baseline step", "candidate step", "baseline wall", "candidate wall", "Δ wall", "Δ device busy", "verdict"]
        .map((t) => h("th", null, t)))),
      h("tbody", null, rows));
    const list = (title, items) => (items.length ? h("div", { class: "compare-findings" }, h("b", null, title),
      h("ul", null, items.map((f) => h("li", { class: f.severity }, h("code", null, f.rule), `: ${f.title}`)))) : null);
    const top = (title, items) => (items && items.length ? h("div", { class: "compare-findings" }, h("b", null, title),
      h("ul", null, items.slice(0, 5).map((o) => h("li", null, h("code", null, o.name), ` ${delta(o.delta_us)} per step`)))) : null);
    fill(this.body, head, h("div", { class: "compare-table" }, table),
      h("div", { class: "compare-lists" },
        list("Appeared", doc.findings.appeared), list("Disappeared", doc.findings.disappeared),
        top("Ops that changed most", doc.ops), top("Kernels that changed most", doc.kernels)));
  }
}
