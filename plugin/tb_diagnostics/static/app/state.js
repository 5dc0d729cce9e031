// What is selected (run, worker, span, step, finding, timeline zoom and mode, the
// critical-path highlight), kept in the URL so a link can be shared. The tab lives in
// an iframe whose own URL the user never
// sees, so the state goes into TensorBoard's URL hash as p.diagnostics.<key>,
// the place TensorBoard's plugin API (experimental.GetURLPluginData) reads
// plugin data from. The iframe is same-origin; if the parent is out of
// reach the iframe's own hash is used instead.

import { decodeName, encodeName, shownName } from "./names.js";

const PREFIX = "p.diagnostics.";
// A value holding a byte that is not UTF-8 (a Latin-1 run name) goes under
// "<key>.bytes", its exact %E9 escapes percent-encoded once more ("caf%25E9"):
// TensorBoard decodes every hash value with decodeURIComponent, which throws on a
// bare %E9 and would take TensorBoard's own router down with the link.
const BYTES = ".bytes";
// zoom: the timeline's visible range "t0,t1" in µs since the trace's first
// event, so it means the same on any machine with the same log dir.
// compare: the baseline run the selected run is compared with (the compare view).
// timeline: "span" while the timeline card shows the whole span (spantl.js; absent: the
// step). path: "on" while the timeline highlights the step's critical path (tlpath.js).
export const KEYS = ["run", "worker", "span", "step", "finding", "zoom", "compare", "timeline", "path"];

function hostLocation() {
  try {
    return window.parent !== window && window.parent.location.hash !== undefined
      ? window.parent : window;
  } catch {
    return window; // cross-origin parent
  }
}

function parseHash(hash) {
  const parts = hash.replace(/^#/, "").split("&").filter(Boolean);
  const own = {};
  const others = [];
  for (const p of parts) {
    const eq = p.indexOf("=");
    // decodeName: a name that is not UTF-8 (%E9) comes back exact, where
    // decodeURIComponent would throw and take the whole hash down with it.
    const k = eq < 0 ? p : decodeName(p.slice(0, eq));
    if (eq >= 0 && k.startsWith(PREFIX)) own[k.slice(PREFIX.length)] = decodeName(p.slice(eq + 1));
    else others.push(p);
  }
  return { own, others };
}

/** The tab's state that a URL hash holds. */
export function stateOfHash(hash) {
  const { own } = parseHash(hash);
  const out = {};
  for (const k of KEYS) {
    const v = own[k + BYTES] !== undefined ? decodeName(own[k + BYTES]) : own[k];
    if (v !== undefined && v !== "") out[k] = v;
  }
  return out;
}

/** The hash entries ("p.diagnostics.run=…") that hold ``state``, names exact. */
export function stateEntries(state) {
  return KEYS.filter((k) => state[k] !== undefined && state[k] !== null && state[k] !== "")
    .map((k) => {
      const v = String(state[k]);
      return shownName(v) === v ? `${PREFIX}${k}=${encodeName(v)}`
        : `${PREFIX}${k}${BYTES}=${encodeURIComponent(encodeName(v))}`;
    });
}

export function readState() {
  return stateOfHash(hostLocation().location.hash || "");
}

export function writeState(state) {
  const win = hostLocation();
  const { others } = parseHash(win.location.hash || "");
  if (win !== window && !others.length) others.push("diagnostics");
  const hash = `#${[...others, ...stateEntries(state)].join("&")}`;
  if (hash === win.location.hash) return;
  try {
    // replaceState: no history entry per click, and no hashchange event for
    // TensorBoard's router to react to.
    win.history.replaceState(win.history.state, "", hash);
  } catch {
    /* a sandboxed parent: the state just is not shareable */
  }
}

/**
 * Call ``cb(state, named)`` when someone else changes the URL hash: a link
 * pasted or edited in the address bar (``named``: the hash holds any of our keys). writeState's replaceState fires no hashchange,
 * so the tab's own writes never come back here.
 */
export function onStateChange(cb) {
  const win = hostLocation();
  win.addEventListener("hashchange", () => {
    const { own, others } = parseHash(win.location.hash || "");
    // Another TensorBoard tab is open: its hash is not ours to follow.
    if (win !== window && others.length && others[0] !== "diagnostics") return;
    cb(readState(), Object.keys(own).length > 0);
  });
}
