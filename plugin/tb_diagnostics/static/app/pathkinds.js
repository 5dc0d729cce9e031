// The critical path's kinds (analysis/critpath: what a step's end waits on) as the tab
// shows them: their words, colours (style.css --cp-*, one set per theme), the steps
// table's stacked bar of a step's path by kind, and its legend.

import { h } from "./dom.js";
import { dur, pct } from "./format.js";

/** The JSON's kinds (steps[].critical_path.by_kind), in the bar's order. */
export const PATH_KINDS = ["host", "input", "device", "comm", "latency"];

export const PATH_LABEL = {
  host: "host", input: "input", device: "device", comm: "comm", latency: "latency",
};

export const PATH_HELP = {
  host: "Python, dispatch and launch calls on a host thread",
  input: "host time inside the DataLoader",
  device: "kernels, copies and memsets that are not collectives",
  comm: "collective kernels, and host waits in collectives",
  latency: "launch latency and queueing between a launch and its activity",
};

export const pathColor = (kind) => `var(--cp-${kind})`;

/** The path's split as text: "host 27% (50.3 ms) · input 37% (68.7 ms) · …", most first. */
export function pathSplit(cp, sep = " · ") {
  const total = cp.total_us || 0;
  return PATH_KINDS.filter((k) => (cp.by_kind[k] || 0) > 0)
    .sort((a, b) => cp.by_kind[b] - cp.by_kind[a])
    .map((k) => `${PATH_LABEL[k]} ${pct(total > 0 ? cp.by_kind[k] / total : null)} (${dur(cp.by_kind[k])})`)
    .join(sep);
}

/** A step's path by kind as a stacked bar as wide as its wall time (the path's length is
 * the wall within 1 %); the title gives the figures. */
export function pathBar(s) {
  const cp = s.critical_path;
  if (!cp) return h("span", { class: "muted", title: "no critical path for this step" }, "—");
  const wall = s.wall_us || cp.total_us || 1;
  const title = [`critical path ${dur(cp.total_us)} of the ${dur(s.wall_us)} wall, ended by the ${cp.ended_by}`,
    ...PATH_KINDS.map((k) => `  ${PATH_LABEL[k]} ${dur(cp.by_kind[k] || 0)} (${pct((cp.by_kind[k] || 0) / wall)}): ${PATH_HELP[k]}`),
    ...(cp.by_op || []).map((o, i) => `${i ? "  " : "mostly in "}${o.op} (${o.kind}) ${dur(o.us)}`)].join("\n");
  return h("span", { class: "bar cp-bar", title, dataset: { wall: s.wall_us, total: cp.total_us } },
    PATH_KINDS.map((k) => h("span", {
      dataset: { kind: k, us: cp.by_kind[k] || 0 },
      style: { width: `${(100 * (cp.by_kind[k] || 0)) / wall}%`, background: pathColor(k) },
    })));
}

/** The kinds' legend (their colours and what each holds); given `steps`, only the kinds
 * some step's path has (a run without collectives lists no comm). */
export function pathLegend(label = "critical path:", steps = null) {
  const has = (k) => !steps || steps.some((s) => (s.critical_path?.by_kind[k] || 0) > 0);
  return h("span", { class: "legend cp-legend", style: { padding: 0 } },
    label ? h("span", null, label) : null,
    PATH_KINDS.filter(has).map((k) => h("span", { title: PATH_HELP[k], "data-kind": k }, h("i", { style: { background: pathColor(k) } }), PATH_LABEL[k])));
}
