// Numbers, words and colours shared by every view.

// "profiler" is the profiler's own time (its flush sync, buffer requests), "compile" and
// "module_load" one-time costs (compiling in the window, a first launch loading its
// module): shown, never judged.
export const CAUSES = ["input", "sync", "comm", "launch", "other", "profiler", "compile", "module_load"];
export const CAUSE_LABEL = {
  busy: "compute busy",
  collective: "collectives no compute overlaps",
  input: "waiting for input",
  sync: "blocked in sync",
  // The host blocked in a collective while the device idles (a collective kernel that
  // runs alone is "collective"); the main cause "comm" is both: see MAIN_CAUSE_LABEL.
  comm: "host in collectives",
  launch: "launching work",
  other: "nothing recorded",
  profiler: "profiler itself",
  compile: "compiling (one-time)",
  module_load: "loading modules (one-time)",
};
/** The main idle cause in words: "comm" counts lone collective kernels and host waits. */
export const MAIN_CAUSE_LABEL = { ...CAUSE_LABEL, comm: "in collectives" };

// The launch cause holds dispatch and the host's own code, a thread feeding the device
// that starts no op for 1 ms or more (idle_host_work_us): worded as that code from this
// share of the cause up, as both from HOST_WORK_MENTION (the headline's thresholds).
const HOST_WORK_MOSTLY = 0.8;
const HOST_WORK_MENTION = 0.2;

/** A step's main idle cause in words, the launch cause split by what the host did. */
export function mainCauseLabel(s) {
  const cause = s.main_idle_cause;
  if (!cause) return "—";
  const launch = s.idle?.launch_us ?? 0;
  const own = cause === "launch" && launch > 0 ? (s.idle_host_work_us ?? 0) / launch : 0;
  if (own >= HOST_WORK_MOSTLY) return "host code launching nothing";
  if (own >= HOST_WORK_MENTION) return "launching work and host code launching nothing";
  return MAIN_CAUSE_LABEL[cause];
}

/**
 * The stacked parts of a step's wall time, bottom up: compute (device activity that is
 * not a collective kernel, what the verdict reads), collective kernels no compute
 * overlaps (busy, but waiting for the other ranks), then the device's idle time by cause.
 */
export const LAYERS = ["busy", "collective", ...CAUSES];

/** µs of one layer of a step (a document older than compute_busy_us has device busy only). */
export function partUs(s, layer) {
  if (layer === "busy") return s.compute_busy_us ?? s.device_busy_us;
  if (layer === "collective") return s.exposed_collective_us ?? 0;
  // A document older than the one-time keys has none: 0, not NaN in the stack.
  return s.idle[`${layer}_us`] ?? 0;
}

/** The step's compute busy fraction, as the verdict reads it. */
export function computeBusy(s) {
  return s.compute_busy ?? s.device_busy;
}

/** Which verdict each idle cause leads to: the chart uses one colour for both. */
export const VERDICT_CAUSE = {
  "compute-bound": "busy",
  "input-bound": "input",
  "sync-bound": "sync",
  "communication-bound": "comm",
  "overhead-bound": "launch",
  "compile-bound": "compile",
  mixed: "mixed",
};
export const VERDICT_HELP = {
  "compute-bound": "the device computes most of the step: only faster kernels or less work help",
  "overhead-bound": "the device waits for the host: while it launches work (Python, dispatch, launches), or runs code of its own that launches none (decoding, preprocessing: CUDA graphs and torch.compile do not remove that)",
  "input-bound": "the device waits for the next batch from the DataLoader",
  "sync-bound": "the host blocks in synchronisations and the device then waits for work",
  "communication-bound": "the rank waits for the others or the network: in collective kernels no compute overlaps, or on the host in collectives (all-reduce…) while the device idles",
  mixed: "neither busy nor idle dominates; the main idle cause is shown",
  "compile-bound": "the device sits idle most of the step while the host compiles (Dynamo, AOTAutograd, Inductor): a one-time cost, not the step's steady work",
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

const CLOSE = { "<": ">", "(": ")", "[": "]", "{": "}" };
const CLOSERS = new Set(Object.values(CLOSE));

/** After `operator`, the operator's own symbol (`()`, `<<`, `->`…) is text, not brackets. */
function operatorSymbolEnd(s, i) {
  if (!/\boperator\s*$/.test(s.slice(Math.max(0, i - 12), i))) return i;
  if (s.startsWith("()", i) || s.startsWith("[]", i)) return i + 2;
  let j = i;
  while (j < s.length && "<>=-!+*/%&|^~,".includes(s[j])) j++;
  return j;
}

/** Where the bracket group opened at ``i`` ends (one past its closer; the end of ``s`` if unclosed). */
function groupEnd(s, i) {
  const want = [CLOSE[s[i]]];
  for (let j = i + 1; j < s.length; j++) {
    const c = s[j];
    const op = operatorSymbolEnd(s, j);
    if (op > j) { j = op - 1; continue; }
    if (c in CLOSE) want.push(CLOSE[c]);
    else if (c === ">") {
      // Only closes a template: "->" and a greater-than inside (…) are text.
      if (s[j - 1] !== "-" && want[want.length - 1] === ">") want.pop();
    } else if (CLOSERS.has(c)) {
      const k = want.lastIndexOf(c);
      if (k < 0) continue;
      want.length = k; // closes its group and any "<" left open inside it (a less-than)
    }
    if (!want.length) return j + 1;
  }
  return s.length;
}

/** A C++ name at its top level: text runs and whole bracket groups, in order. */
function topLevel(s) {
  const parts = [];
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    const op = operatorSymbolEnd(s, i);
    if (op > i) { i = op - 1; continue; }
    if (!(s[i] in CLOSE) || (s[i] === ">" && s[i - 1] === "-")) continue;
    if (i > start) parts.push({ open: null, text: s.slice(start, i) });
    const end = groupEnd(s, i);
    parts.push({ open: s[i], text: s.slice(i, end) });
    start = end;
    i = end - 1;
  }
  if (start < s.length) parts.push({ open: null, text: s.slice(start) });
  return parts;
}

/**
 * The qualified function name of a demangled C++ signature, as ["ns", …, "name"]:
 * no return type, template arguments or parameter list; null when ``s`` does
 * not look like C++ (an op, a Python frame, a memcpy: those are only cut).
 */
export function cppName(s) {
  const parts = topLevel(s);
  // Trailing qualifiers and clone suffixes: "… const", "… [clone .kd]".
  const QUAL = /(\s*\b(const|volatile|noexcept)\b|\s*&&?|\s+)+$/;
  for (;;) {
    const last = parts[parts.length - 1];
    if (last?.open === "[") parts.pop();
    else if (last?.open === null && QUAL.test(last.text)) {
      last.text = last.text.replace(QUAL, "");
      if (!last.text) parts.pop();
    } else break;
  }
  // A parameter list follows the name directly: "f(int)", never "Memcpy HtoD (Pageable -> Device)".
  const before = parts[parts.length - 2];
  const hasParams = parts.length > 1 && parts[parts.length - 1].open === "(" &&
    !(before.open === null && /\s$/.test(before.text));
  const cxx = hasParams || parts.some((p) => p.open === "<") || parts.some((p) => p.open === null && p.text.includes("::"));
  if (!cxx) return null;
  if (hasParams) parts.pop();
  // Rebuild the qualified name: templates dropped, "(anonymous namespace)" and
  // lambda scopes kept, a local scope's own parameters shown as "(…)".
  let out = "";
  for (const p of parts) {
    if (p.open === null) out += p.text;
    else if (p.open === "(") out += /^\(anonymous namespace\)$|^\(\)$/.test(p.text) ? p.text : "(…)";
    else if (p.open === "{") out += p.text.startsWith("{lambda") ? "{lambda}" : p.text;
  }
  // The return type (and any specifiers) is what comes before the last space
  // outside brackets; bracketed text never holds a top-level space here.
  out = out.replace(/\s+(const|volatile)(?=::)/g, "").trim();
  const masked = out.replace(/\(anonymous namespace\)/g, (m) => "_".repeat(m.length));
  const cut = masked.lastIndexOf(" ");
  if (cut >= 0) out = out.slice(cut + 1);
  const names = out.split("::").map((x) => x.trim()).filter(Boolean);
  if (!names.length) return null;
  // cutlass::Kernel<cutlass_80_tensorop_…_align8>: the generic wrapper's first
  // template argument is the kernel a reader knows.
  const tmpl = parts[parts.length - 1];
  const arg = tmpl?.open === "<" ? /^<\s*([\w:]+)\s*[,>]/.exec(tmpl.text) : null;
  if (arg && /^(device_)?[Kk]ernel\d*$/.test(names[names.length - 1])) names[names.length - 1] += `<${arg[1]}>`;
  return names;
}

/**
 * Shorten a long name for a label. A C++ signature loses its return type,
 * template arguments, parameter list and anonymous namespaces, then leading
 * namespaces until it fits; the function's own name is always kept, whole.
 * Anything else is cut at ``max`` characters. Never empty, never ends in "::".
 */
export function shortName(name, max = 80) {
  const s = String(name ?? "").trim();
  if (!s) return "(unnamed)";
  // A bare identifier (a cuBLAS or Triton kernel) is the function's own name: kept whole.
  if (s.length <= max || /^[A-Za-z_$][\w$]*$/.test(s)) return s;
  const names = cppName(s);
  if (!names) return `${s.slice(0, max - 1)}…`;
  const own = names[names.length - 1];
  // "(anonymous namespace)" tells a reader least and would push the name out
  // of a narrow column: gone from every shortened name.
  const scope = names.slice(0, -1).filter((x) => x !== "(anonymous namespace)");
  const join = () => [...scope, own].join("::");
  while (scope.length && join().length > max) scope.shift();
  return join();
}

/** The function's own name of a C++ signature (``cunn_SoftMaxForward``); null for other names. */
export function ownName(name) {
  const s = String(name ?? "").trim();
  const names = /[<(]/.test(s) ? cppName(s) : null;
  return names ? names[names.length - 1] : null;
}
