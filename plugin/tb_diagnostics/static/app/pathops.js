// Which nodes of the dispatch chain the step's critical path runs through, and for how
// long. The tree groups a step's calls by name under their parent, so the path's time is
// matched by name too: an op node gets every segment whose innermost op is that op (its
// own dispatch, its launches' latency, its kernels), any other node the segments named
// after it under the same op (a cudaLaunchKernel, a kernel, the DataLoader's range). An op
// that runs in several places of the step shows its time on the path in all of them.

import { dur } from "./format.js";
import { PATH_KINDS, PATH_LABEL } from "./pathkinds.js";

const add = (map, key, g) => {
  const r = map.get(key) || { us: 0, n: 0, kinds: {} };
  r.us += g.dur_us;
  r.n += 1;
  r.kinds[g.kind] = (r.kinds[g.kind] || 0) + g.dur_us;
  map.set(key, r);
};

const leafKey = (op, name) => `${op ?? ""}\u0001${name ?? ""}`;

/** `cp`: the step route's critical_path (its segments: the whole path, or the longest). */
export function pathOps(cp) {
  if (!cp || !cp.segments?.length) return null;
  const ops = new Map(), leaves = new Map();
  for (const g of cp.segments) {
    if (g.op) add(ops, g.op, g);
    if (g.name !== g.op) add(leaves, leafKey(g.op, g.name), g);
  }
  const total = cp.total_us || 0;
  const partial = cp.segments_omitted > 0
    ? `\n(of the path's ${cp.segments.length.toLocaleString()} longest segments, of ${cp.segments_total.toLocaleString()})` : "";
  return {
    total,
    /** `parent(id)`: a node's parent node. Null where the path does not run through `n`. */
    of(n, parent) {
      let r = n.kind === "op" ? ops.get(n.name) : undefined;
      if (!r) {
        let up = parent(n.id);
        while (up && up.kind !== "op") up = parent(up.id);
        r = leaves.get(leafKey(up ? up.name : null, n.name));
      }
      if (!r || !(r.us > 0)) return null;
      const split = PATH_KINDS.filter((k) => r.kinds[k] > 0).map((k) => `${PATH_LABEL[k]} ${dur(r.kinds[k])}`).join(", ");
      const title = `on the critical path: ${dur(r.us)} of the step's ${dur(total)} (${split}), ` +
        `in ${r.n.toLocaleString()} segment${r.n > 1 ? "s" : ""}\nevery call of this name here in the step${partial}`;
      return { us: r.us, title };
    },
  };
}
