// The dispatch chain of the selected step as a collapsible tree:
// ProfilerStep#N → record_function → aten::* → cudaLaunchKernel → kernel,
// with host time, self time and device time at each level. The heaviest
// chain is open at first. Keyboard: arrows move / open / close, Enter
// toggles, "t" shows the node's calls in the timeline. The ops the step's critical
// path runs through carry a "path" badge (pathOps: by name, as the tree groups calls).

import { h } from "./dom.js";
import { dur, pct, shortName } from "./format.js";
import { pathOps } from "./pathops.js";

const MARK_CLASS = { fusion: "fusion", "hidden copy": "copy", "occupancy query": "occupancy", sync: "sync" };
const MARK_HELP = {
  fusion: "several operations in one call or kernel (e.g. addmm = bias + GEMM)",
  "hidden copy": "a device copy or fill under an op that is not a copy op",
  "occupancy query": "cuBLAS/cuDNN asks for occupancy before a heavyweight launch",
  sync: "the host waits for the device here",
};

export class TreeView {
  constructor(container, { onShow }) {
    this.container = container;
    this.onShow = onShow;
    this.expanded = new Set();
    this.byId = new Map();
    this.parentOf = new Map();
  }

  /** `path`: the step route's critical_path (undefined keeps the one before). */
  setData(tree, openPath, path) {
    if (path !== undefined) this.pathDoc = path;
    this.tree = tree;
    this.byId.clear();
    this.parentOf.clear();
    const index = (n, parent) => {
      this.byId.set(n.id, n);
      if (parent) this.parentOf.set(n.id, parent.id);
      (n.children || []).forEach((c) => index(c, n));
    };
    index(tree, null);
    const threads = [...this.byId.values()].filter((n) => n.kind === "thread").map((n) => n.name);
    this.path = pathOps(this.pathDoc, new Set(threads));
    this.expanded = new Set(openPath.slice(0, -1));
    this.focusId = openPath[openPath.length - 1] ?? tree.id;
    this.render();
  }

  render() {
    const root = h("div", { role: "tree", class: "tree", "aria-label": "dispatch chain", onkeydown: (e) => this.key(e) });
    this.appendNode(root, this.tree, 0);
    this.container.replaceChildren(
      h("div", { class: "tree-head" }, h("span", null, "call (× count)"), h("span", null, "host"),
        h("span", null, "self"), h("span", null, "device")),
      root);
    const focus = root.querySelector(`[data-id="${this.focusId}"]`) || root.querySelector("[role=treeitem]");
    if (focus) focus.tabIndex = 0;
  }

  appendNode(parentEl, n, depth) {
    const kids = n.children || [];
    const open = this.expanded.has(n.id);
    const isDevice = ["kernel", "memcpy", "memset"].includes(n.kind);
    const host = isDevice ? "" : dur(n.total_us);
    const title = [n.name, `${n.kind} · ${n.count} call(s)`,
      n.streams ? `stream ${n.streams.join(", ")}` : "",
      ...(n.marks || []).map((m) => `${m}: ${MARK_HELP[m] || ""}`)].filter(Boolean).join("\n");
    const row = h("div", { class: `node k-${n.kind}`, style: { "--depth": depth }, title, onclick: () => this.toggle(n.id) },
      h("span", { class: "nname" },
        h("span", { class: "tw", "aria-hidden": "true" }, kids.length ? (open ? "▾" : "▸") : ""),
        this.pathBadge(n), // first: a long name's row is cut at its end
        // Kernels sit deep in a narrow column: short enough that their own name shows.
        h("span", { class: "n" }, shortName(n.name, isDevice ? 40 : 110)),
        n.count > 1 ? h("span", { class: "count" }, `×${n.count}`) : null,
        h("span", { class: "kind" }, n.kind === "thread" ? "thread" : n.streams ? `${n.kind} · stream ${n.streams.join(",")}` : n.kind),
        (n.marks || []).map((m) => h("span", { class: `badge ${MARK_CLASS[m] || ""}` }, m)),
        n.rows && n.rows.length && n.rows[0] >= 0 ? h("button", {
          class: "show", tabindex: -1, title: "show these calls in the timeline",
          onclick: (e) => { e.stopPropagation(); this.onShow(n); },
        }, "timeline ›") : null),
      h("span", { class: "nt" }, host),
      h("span", { class: "nt" }, isDevice || n.kind === "thread" ? "" : dur(n.self_us)),
      h("span", { class: "nt dev" }, n.device_us ? dur(n.device_us) : ""));
    const item = h("div", {
      role: "treeitem", tabindex: -1, dataset: { id: n.id },
      "aria-expanded": kids.length ? String(open) : null, "aria-level": depth + 1,
      onfocus: () => { this.focusId = n.id; },
    }, row);
    parentEl.append(item);
    if (open && kids.length) {
      const group = h("div", { role: "group" });
      kids.forEach((c) => this.appendNode(group, c, depth + 1));
      item.append(group);
    }
  }

  toggle(id, focus = true) {
    const n = this.byId.get(id);
    if (!n || !(n.children || []).length) return;
    if (this.expanded.has(id)) this.expanded.delete(id);
    else this.expanded.add(id);
    this.focusId = id;
    this.render();
    if (focus) this.focus(id);
  }

  focus(id) {
    const el = this.container.querySelector(`[role=treeitem][data-id="${id}"]`);
    if (!el) return;
    for (const x of this.container.querySelectorAll("[role=treeitem][tabindex='0']")) x.tabIndex = -1;
    el.tabIndex = 0;
    el.focus();
    this.focusId = id;
  }

  key(e) {
    const items = [...this.container.querySelectorAll("[role=treeitem]")];
    const at = items.findIndex((x) => x === document.activeElement);
    if (at < 0) return;
    const id = Number(items[at].dataset.id);
    const n = this.byId.get(id);
    const hasKids = (n.children || []).length > 0;
    let handled = true;
    if (e.key === "ArrowDown" && at + 1 < items.length) this.focus(Number(items[at + 1].dataset.id));
    else if (e.key === "ArrowUp" && at > 0) this.focus(Number(items[at - 1].dataset.id));
    else if (e.key === "ArrowRight") {
      if (hasKids && !this.expanded.has(id)) this.toggle(id);
      else if (hasKids) this.focus(n.children[0].id);
    } else if (e.key === "ArrowLeft") {
      if (this.expanded.has(id)) this.toggle(id);
      else if (this.parentOf.has(id)) this.focus(this.parentOf.get(id));
    } else if (e.key === "Enter" || e.key === " ") this.toggle(id);
    else if (e.key === "t" && n.rows && n.rows.length && n.rows[0] >= 0) this.onShow(n);
    else handled = false;
    if (handled) e.preventDefault();
  }

  /**
   * Open the tree at a node (a path of ids from the root, from the step route's
   * highlight_path) and down its heaviest chain, so the op's launch and kernel
   * show; mark the node and scroll it into the card, keeping the page still.
   */
  reveal(tree, path) {
    const keep = this.tree === tree ? this.expanded : new Set([...this.expanded]);
    if (tree !== this.tree) this.setData(tree, [tree.id]);
    this.expanded = new Set([...keep, ...path.slice(0, -1)]);
    const target = path[path.length - 1];
    for (let n = this.byId.get(target), depth = 0; n && depth < 8; depth++) {
      const kids = (n.children || []).filter((c) => c.kind !== "more");
      if (!kids.length) break;
      this.expanded.add(n.id);
      n = kids.reduce((a, b) => ((b.device_us || 0) > (a.device_us || 0) ? b : a));
    }
    this.focusId = target;
    this.render();
    this.mark(target);
    this.container.dataset.revealed = String(target);
    const el = this.container.querySelector(`[data-id="${target}"] > .node`);
    if (el) {
      const box = this.container.getBoundingClientRect();
      const r = el.getBoundingClientRect();
      this.container.scrollTop += r.top - box.top - this.container.clientHeight / 3;
    }
  }

  /** The "path" badge of a node the step's critical path runs through, else null. */
  pathBadge(n) {
    const p = this.path?.of(n, (id) => this.byId.get(this.parentOf.get(id)));
    if (!p) return null;
    return h("span", { class: "badge path", title: p.title, dataset: { pathUs: p.us } }, `path ${p.us >= 0.005 * this.path.total ? pct(p.us / this.path.total) : "<1%"}`);
  }

  /** Mark the node whose rows are shown in the timeline. */
  mark(id) {
    for (const x of this.container.querySelectorAll(".node.hl")) x.classList.remove("hl");
    this.container.querySelector(`[data-id="${id}"] > .node`)?.classList.add("hl");
  }
}
