// Run → worker → span pickers.

import { h } from "./dom.js";
import { bytes } from "./format.js";
import { shownName } from "./names.js";

/** A span id is the file's timestamp (ms, µs or ns since the epoch) or its name. */
export function spanLabel(span) {
  if (!/^\d{13,19}$/.test(span.span)) return span.span;
  const ms = Number(span.span.slice(0, 13));
  const d = new Date(ms);
  const pad = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

export class Picker {
  constructor(container, { onChange }) {
    this.onChange = onChange;
    this.run = h("select", { "aria-label": "run", onchange: () => this.changed("run") });
    this.worker = h("select", { "aria-label": "worker", onchange: () => this.changed("worker") });
    this.span = h("select", { "aria-label": "span", onchange: () => this.changed("span") });
    container.replaceChildren(
      h("label", null, "Run", this.run),
      h("label", null, "Worker", this.worker),
      h("label", null, "Span", this.span));
    this.runs = [];
  }

  /**
   * Fill the pickers; returns the selection that is valid in ``runs``, with ``missing``:
   * the wanted run's name where ``runs`` has no such run (a stale or mistyped link), else null.
   */
  setRuns(runs, want) {
    this.runs = runs;
    const run = runs.find((r) => r.run === want.run) || runs[0];
    const worker = run.workers.find((w) => w.worker === want.worker) || run.workers[0];
    const span = worker.spans.find((s) => s.span === want.span) || worker.spans[0];
    this.fill(this.run, runs.map((r) => [r.run, r.run]), run.run);
    this.fill(this.worker, run.workers.map((w) => [w.worker, w.worker]), worker.worker);
    this.fill(this.span, worker.spans.map((s) => [s.span, `${spanLabel(s)}${s.state === "error" ? "  (unreadable)" : ""}`]), span.span);
    this.span.title = shownName(`${span.file} · ${bytes(span.size)}`);
    const missing = want.run && !runs.some((r) => r.run === want.run) ? want.run : null;
    return { run: run.run, worker: worker.worker, span: span.span, file: span, missing };
  }

  fill(select, options, value) {
    select.replaceChildren(...options.map(([v, label]) => h("option", { value: v }, label)));
    select.value = value;
    select.disabled = options.length < 2 && select !== this.run;
  }

  changed(which) {
    const want = { run: this.run.value, worker: this.worker.value, span: this.span.value };
    if (which === "run") { want.worker = null; want.span = null; }
    if (which === "worker") want.span = null;
    this.onChange(this.setRuns(this.runs, want));
  }
}
