// What is selected (run, worker, span, step, finding, timeline zoom), kept in the URL so a
// link can be shared. The tab lives in an iframe whose own URL the user never
// sees, so the state goes into TensorBoard's URL hash as p.diagnostics.<key>,
// the place TensorBoard's plugin API (experimental.GetURLPluginData) reads
// plugin data from. The iframe is same-origin; if the parent is out of
// reach the iframe's own hash is used instead.

const PREFIX = "p.diagnostics.";
// zoom: the timeline's visible range "t0,t1" in µs since the trace's first
// event, so it means the same on any machine with the same log dir.
// compare: the baseline run the selected run is compared with (the compare view).
export const KEYS = ["run", "worker", "span", "step", "finding", "zoom", "compare"];

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
    const k = eq < 0 ? p : decodeURIComponent(p.slice(0, eq));
    if (eq >= 0 && k.startsWith(PREFIX)) own[k.slice(PREFIX.length)] = decodeURIComponent(p.slice(eq + 1));
    else others.push(p);
  }
  return { own, others };
}

export function readState() {
  const { own } = parseHash(hostLocation().location.hash || "");
  const out = {};
  for (const k of KEYS) if (own[k] !== undefined && own[k] !== "") out[k] = own[k];
  return out;
}

export function writeState(state) {
  const win = hostLocation();
  const { others } = parseHash(win.location.hash || "");
  if (win !== window && !others.length) others.push("diagnostics");
  const mine = KEYS.filter((k) => state[k] !== undefined && state[k] !== null && state[k] !== "")
    .map((k) => `${PREFIX}${k}=${encodeURIComponent(state[k])}`);
  const hash = `#${[...others, ...mine].join("&")}`;
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
