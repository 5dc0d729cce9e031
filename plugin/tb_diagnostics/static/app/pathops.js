// Which nodes of the dispatch chain the step's critical path runs through, and for how
// long. The tree groups a step's calls by name under their parent, per thread, so the
// path's time is matched by name and thread too (the step route gives each segment the
// thread of its op: server/path_threads.py): an op node gets every segment whose innermost
// op is that op on that thread (its own dispatch, its launches' latency, its kernels), any
// other node the segments named after it under the same op (a cudaLaunchKernel, a kernel,
// the DataLoader's range). An op that runs in several places of one thread's step shows
// its time on the path in all of them.

import { dur } from "./format.js";
import { PATH_KINDS, PATH_LABEL } from "./pathkinds.js";

const add = (map, key, g) => {
  const r = map.get(key) || { us: 0, n: 0, kinds: {} };
  r.us += g.dur_us;
  r.n += 1;
  r.kinds[g.kind] = (r.kinds[g.kind] || 0) + g.dur_us;
  map.set(key, r);
};

/** The main thread (no thread node above it in the tree), and a segment of no known thread. */
const MAIN = "", ANY = "\u0003";
const key = (thread, op, name) => `${thread}\u0001${op ?? ""}\u0001${name ?? ""}`;

/** `cp`: the step route's critical_path (its segments: the whole path, or the longest);
 * `threads`: the names of the tree's thread nodes (the threads other than the step's). */
export function pathOps(cp, threads = new Set()) {
  if (!cp || !cp.segments?.length) return null;
  const ops = new Map(), leaves = new Map();
  for (const g of cp.segments) {
    const t = g.thread === null || g.thread === undefined ? ANY : threads.has(g.thread) ? g.thread : MAIN;
    if (g.op) add(ops, key(t, null, g.op), g);
    if (g.name !== g.op) add(leaves, key(t, g.op, g.name), g);
  }
  const total = cp.total_us || 0;
  const partial = cp.segments_omitted > 0
    ? `\n(of the path's ${cp.segments.length.toLocaleString()} longest segments, of ${cp.segments_total.toLocaleString()})` : "";
  const merged = (map, ...keys) => {
    const out = { us: 0, n: 0, kinds: {} };
    for (const k of keys) {
      const r = map.get(k);
      if (!r) continue;
      out.us += r.us;
      out.n += r.n;
      for (const [kind, us] of Object.entries(r.kinds)) out.kinds[kind] = (out.kinds[kind] || 0) + us;
    }
    return out;
  };
  return {
    total,
    /** `parent(id)`: a node's parent node. Null where the path does not run through `n`. */
    of(n, parent) {
      let up = parent(n.id), thread = MAIN, op = null;
      for (; up; up = parent(up.id)) {
        if (op === null && up.kind === "op") op = up.name;
        if (up.kind === "thread") { thread = up.name; break; }
      }
      let r = n.kind === "op" ? merged(ops, key(thread, null, n.name), key(ANY, null, n.name)) : null;
      if (!r || !(r.us > 0)) r = merged(leaves, key(thread, op, n.name), key(ANY, op, n.name));
      if (!(r.us > 0)) return null;
      const split = PATH_KINDS.filter((k) => r.kinds[k] > 0).map((k) => `${PATH_LABEL[k]} ${dur(r.kinds[k])}`).join(", ");
      const title = `on the critical path: ${dur(r.us)} of the step's ${dur(total)} (${split}), ` +
        `in ${r.n.toLocaleString()} segment${r.n > 1 ? "s" : ""}\nevery call of this name here in the step${partial}`;
      return { us: r.us, title };
    },
  };
}
