// Whole-tab states: no traces yet, no usable log dir, an unreadable file, a run the
// log dir does not have, loading.

import { fill, h } from "./dom.js";
import { bytes } from "./format.js";

const SNIPPET = `import torch

with torch.profiler.profile(
        schedule=torch.profiler.schedule(wait=1, warmup=1, active=3),
        on_trace_ready=torch.profiler.tensorboard_trace_handler("./log/my_run")) as prof:
    for batch in loader:
        train_step(batch)
        prof.step()   # one ProfilerStep#N per iteration`;

export function emptyState(runs) {
  return h("div", { class: "state", id: "empty" },
    h("h1", null, "No PyTorch profiler traces yet"),
    h("p", null, "This tab explains, step by step, why a model is slow. It reads the ",
      h("code", null, "*.pt.trace.json[.gz]"), " files that the PyTorch profiler writes, under ",
      h("code", null, runs.logdir || "the log dir"), "."),
    h("p", null, "Wrap a few training steps like this, then press TensorBoard's reload button:"),
    h("pre", null, SNIPPET),
    h("p", null, "Or make sample runs with the scripts in ", h("code", null, "workloads/"), ", for example ",
      h("code", null, "python workloads/01_matmul_add.py --logdir ./log"), "."));
}

export function problemState(runs) {
  const title = runs.status === "no_logdir" ? "No log directory" : "The log directory cannot be read";
  return h("div", { class: "state error", id: "problem" },
    h("h1", null, title),
    h("p", null, runs.message || ""),
    h("p", { class: "muted" }, "Start TensorBoard with ", h("code", null, "tensorboard --logdir ./log"),
      " where ", h("code", null, "./log"), " is the directory given to ",
      h("code", null, "tensorboard_trace_handler"), "."));
}

export function spanErrorState(err, others) {
  return h("div", { class: "state error", id: "span-error" },
    h("h1", null, "This trace file cannot be read"),
    h("ul", { class: "errors" }, h("li", null, h("code", null, err.file), ` — ${err.error.replace(`${err.file}: `, "")}`)),
    others.length ? [h("p", null, "Other files that could not be read:"),
      h("ul", { class: "errors" }, others.map((e) => h("li", null, h("code", null, e.file), ` — ${e.message.replace(`${e.file}: `, "")}`)))] : null,
    h("p", { class: "muted" }, "If the profiler is still writing it, press reload in a moment. Pick another span above."));
}

const STAGE = {
  queued: "Waiting to load",
  reading: "Reading and parsing",
  analysing: "Analysing",
  ready: "Drawing",
  error: "Failed",
};

/** Loading: the stage, the file, how long so far; a moving bar while a stage runs. */
export function loadingState(p) {
  const frac = p ? p.fraction : 0;
  const what = p ? `${STAGE[p.stage] || p.stage} ${p.file}` : "Loading";
  const size = p && p.size ? ` (${bytes(p.size)})` : "";
  const took = p && p.elapsed_s >= 1 ? ` · ${Math.round(p.elapsed_s)} s` : "";
  return h("div", { class: "loading", id: "loading", role: "status" },
    h("div", null, `${what}${size}…${took}`),
    h("div", { class: "progress busy", role: "progressbar", "aria-valuemin": 0, "aria-valuemax": 100, "aria-valuenow": Math.round(frac * 100) },
      h("span", { style: { width: `${Math.max(Math.round(frac * 100), 8)}%` } })));
}

/**
 * A run named in the URL that the log dir does not have: say so, list the runs there, and
 * offer the first; nothing opens by itself (it would look like the run that was asked for).
 */
export function missingRunState(name, runs, logdir, onOpen) {
  const first = runs[0].run;
  return h("div", { class: "state error", id: "missing-run" },
    h("h1", null, "Run ", h("code", null, name), " not found in this log dir"),
    h("p", null, logdir ? ["The log dir ", h("code", null, logdir), " has "] : "The log dir has ",
      `${runs.length} run${runs.length === 1 ? "" : "s"}; the link may be stale, or the run was moved or deleted.`),
    h("p", null, h("button", { type: "button", id: "open-first-run", onclick: () => onOpen(first) }, "Open ", h("code", null, first)),
      " (the first run), or pick one:"),
    h("ul", { class: "runs-list" }, runs.map((r) => h("li", null,
      h("button", { type: "button", class: "linkish", onclick: () => onOpen(r.run) }, r.run)))));
}

/** Show ``missingRunState`` in the tab (``app``: main.js's App), the cards of the run before hidden. */
export function showMissingRun(app, sel) {
  const runs = app.runs.runs;
  app.headline.hidden = true;
  app.device.textContent = "";
  app.ranks.setData(null);
  app.ranksRun = app.compareRun = null;
  app.compare.el.hidden = true;
  app.abort("span");
  app.abort("step");
  fill(app.main, missingRunState(sel.missing, runs, app.runs.logdir,
    (run) => app.pick(app.picker.setRuns(runs, { run }))));
  document.body.dataset.ready = "missing";
}
