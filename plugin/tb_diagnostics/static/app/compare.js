// The compare view: the selected run (candidate) against another run of the log
// dir (baseline), from the /compare route — the same document as
// `tb-diagnostics compare --format json`. Steps are paired by position among the
// warm steps, since step numbers depend on each run's profiler schedule.

import { card, fill, h } from "./dom.js";
import { dur, verdictColor } from "./format.js";

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
    const others = runs.filter((r) => r.run !== current);
    this.el.hidden = !others.length;
    fill(this.select, h("option", { value: "" }, "— pick a run —"),
      others.map((r) => h("option", { value: r.run }, r.run)));
    this.select.value = others.some((r) => r.run === baseline) ? baseline : "";
    // Nothing picked: only the card's header (a one-line control) shows.
    if (!this.select.value) fill(this.body);
    this.body.hidden = !this.select.value;
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
