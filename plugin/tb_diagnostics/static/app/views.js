// The span's table views (Operators, Kernels, Memory, Modules): one card each, the
// views torch-tb-profiler users work in. Each view module exports a class listed in
// VIEWS below; the controller (main.js) only mounts them and tells them what changed.
//
// A view class is constructed as `new View(body, tools, ctx)` and may implement:
//   setSpan(summary)  a span's summary is on screen (a new run, worker or span)
//   selectStep(st)    a step of it was selected (st: the summary's step entry)
//   build()           the theme changed (re-read colours)
// `ctx.fetch(params, opts)` asks the `/view` route for this view's page of the current
// span (name, run, worker and span filled in; 202s are waited for like the step route);
// `ctx.openStep(number)`, `ctx.openOp(op)` and `ctx.openFinding(key)` reach the other
// cards, `ctx.state()` is the shareable URL state and `ctx.setState(patch)` writes to it.

import { getJSON } from "./api.js";
import { card } from "./dom.js";
import { KernelsView } from "./kernels.js";
import { MemoryView } from "./memory.js";
import { ModulesView } from "./modules.js";
import { OpsView } from "./ops.js";

/** [card id, title, class]: a view module adds its line here (and nothing in main.js). */
const VIEWS = [
  ["ops", "Operators", OpsView],
  ["kernels", "Kernels", KernelsView],
  ["memory", "Memory", MemoryView],
  ["modules", "Modules", ModulesView],
];

export function mountViews(app) {
  return VIEWS.map(([id, title, View]) => {
    const c = card(title, { id });
    const ctx = {
      fetch: (params, opts) => {
        const { run, worker, span } = app.state;
        return getJSON("view", { name: id, run, worker, span, ...params }, opts);
      },
      openStep: (number) => {
        const st = app.summary?.steps.find((x) => x.step === number);
        if (st) app.selectStep(st.index, { reveal: true });
      },
      openOp: (op) => { app.openOp(op); app.roofline?.showOp(op); },
      openFinding: (key) => app.openFinding(key),
      state: () => app.state,
      setState: (patch) => app.setState(patch),
    };
    return { el: c.el, view: new View(c.body, c.head.querySelector(".card-tools"), ctx) };
  });
}

/** Call `method` on every mounted view that has it. */
export function tellViews(views, method, ...args) {
  for (const v of views) v.view[method]?.(...args);
}
