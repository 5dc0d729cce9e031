// Numbers, words and colours shared by every view.

// "profiler" is the profiler's own time (its flush sync, buffer requests): shown, never judged.
export const CAUSES = ["input", "sync", "comm", "launch", "other", "profiler"];
export const CAUSE_LABEL = {
  busy: "device busy",
  input: "waiting for input",
  sync: "blocked in sync",
  comm: "in collectives",
  launch: "launching work",
  other: "nothing recorded",
  profiler: "profiler itself",
};
/** Which verdict each idle cause leads to: the chart uses one colour for both. */
export const VERDICT_CAUSE = {
  "compute-bound": "busy",
  "input-bound": "input",
  "sync-bound": "sync",
  "communication-bound": "comm",
  "overhead-bound": "launch",
  mixed: "mixed",
};
export const VERDICT_HELP = {
  "compute-bound": "the device is busy most of the step: only faster kernels or less work help",
  "overhead-bound": "the device waits while the host launches work (Python, dispatch, launches)",
  "input-bound": "the device waits for the next batch from the DataLoader",
  "sync-bound": "the host blocks in synchronisations and the device then waits for work",
  "communication-bound": "the host waits in collectives (all-reduce…): for the network or for other ranks",
  mixed: "neither busy nor idle dominates; the main idle cause is shown",
};

/** CSS custom property value (colours live in style.css, per theme). */
export function cssVar(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

export function causeColor(cause) {
  return cssVar(`--c-${cause}`);
}

export function verdictColor(verdict) {
  return causeColor(VERDICT_CAUSE[verdict] || "mixed");
}

export function ms(us, digits) {
  if (us === null || us === undefined || Number.isNaN(us)) return "—";
  const v = us / 1000;
  const d = digits ?? (Math.abs(v) >= 100 ? 0 : Math.abs(v) >= 10 ? 1 : 2);
  return v.toFixed(d);
}

/** A duration with its unit, scaled: 850 ns, 12.3 µs, 4.56 ms, 1.20 s. */
export function dur(us) {
  if (us === null || us === undefined || Number.isNaN(us)) return "—";
  const a = Math.abs(us);
  if (a < 1) return `${(us * 1000).toFixed(0)} ns`;
  if (a < 1000) return `${us.toFixed(a < 10 ? 2 : 1)} µs`;
  if (a < 1e6) return `${(us / 1000).toFixed(a < 1e4 ? 2 : 1)} ms`;
  return `${(us / 1e6).toFixed(2)} s`;
}

export function pct(x) {
  if (x === null || x === undefined || Number.isNaN(x)) return "—";
  return `${Math.round(x * 100)}%`;
}

export function bytes(n) {
  if (!n && n !== 0) return "";
  const u = ["B", "kB", "MB", "GB"];
  let i = 0;
  while (n >= 1000 && i < u.length - 1) { n /= 1000; i++; }
  return `${n.toFixed(i ? 1 : 0)} ${u[i]}`;
}

export function stepLabel(step) {
  return step === null || step === undefined ? "whole span" : `#${step}`;
}

/** "5–8, 10" from [5, 6, 7, 8, 10]. */
export function ranges(numbers) {
  const xs = [...new Set(numbers.filter((x) => x !== null && x !== undefined))].sort((a, b) => a - b);
  const out = [];
  for (let i = 0; i < xs.length; i++) {
    let j = i;
    while (j + 1 < xs.length && xs[j + 1] === xs[j] + 1) j++;
    out.push(j > i ? `${xs[i]}–${xs[j]}` : `${xs[i]}`);
    i = j;
  }
  return out.join(", ");
}

/** Shorten a long C++ kernel name for a label: drop template and argument lists. */
export function shortName(name, max = 80) {
  let s = String(name);
  if (s.length > max) {
    s = s.replace(/\(.*\)$/s, "").replace(/<[^<>]*(?:<[^<>]*>[^<>]*)*>/g, "<…>");
  }
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}
