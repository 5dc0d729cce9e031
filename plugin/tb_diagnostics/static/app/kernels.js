// The Kernels card: every kernel of the span (or of the selected step) by name, or by
// name + the op that launched it, as torch-tb-profiler's GPU Kernel view had it: calls,
// device time, the launch configuration (grid, block, registers, shared memory), the
// occupancy the trace records next to the theoretical one for the part, precision and
// Tensor Cores. The server sorts, filters and pages (/view?name=kernels); a row opens
// its first kernels in the timeline (Enter), or their launching ops (o).

import { PagedView } from "./pagedview.js";
import { fill, h } from "./dom.js";
import { bytes, dur, ms, shortName, stepLabel } from "./format.js";
import { choice, debounce, rowKeys } from "./ops.js";

const PAGE = 50;
const COLUMNS = [
  { key: "name", label: "Kernel" },
  { key: "op", label: "Launched by", byOp: true },
  { key: "calls", label: "Calls", num: true, int: true },
  { key: "total_us", label: "Total ms", num: true },
  { key: "mean_us", label: "Mean", num: true, dur: true },
  { key: "min_us", label: "Min", num: true, dur: true },
  { key: "max_us", label: "Max", num: true, dur: true },
  { key: "share_pct", label: "Share", num: true, pct: true, title: "of the kernel time shown (span or step)" },
  { key: "precision", label: "Precision", nosort: true },
  { key: "tensor_core", label: "TC", nosort: true, title: "ran on Tensor Cores" },
  { key: "grid", label: "Grid", dims: true, nosort: true },
  { key: "block", label: "Block", dims: true, nosort: true },
  { key: "registers_per_thread", label: "Regs", num: true, int: true, title: "registers per thread" },
  { key: "shared_memory_bytes", label: "Shared mem", num: true, bytes: true, title: "shared memory per block, static + dynamic" },
  { key: "occupancy_pct", label: "Occupancy", num: true, occ: true, title: "recorded (the profiler's estimate, capped by the grid) / theoretical (registers, shared memory and block size on this part)" },
];

const dims = (v) => (Array.isArray(v) ? v.join("×") : "—");
const pct0 = (v) => (v === null || v === undefined ? "—" : `${Math.round(v)}%`);

export class KernelsView extends PagedView {
  constructor(body, tools, ctx) {
    super(body, ctx, { title: "Kernels", query: { group: "name" }, pageSize: PAGE });
    this.groupSel = choice("group kernels", [["name", "by name"], ["op", "by name + launching op"]], (v) => this.set({ group: v }));
    this.scopeSel = choice("kernels of", [["span", "whole span"], ["step", "selected step"]], (v) => { this.scope = v; this.set({}); });
    this.search = h("input", { type: "search", class: "ops-search", placeholder: "filter kernels", "aria-label": "filter kernels by name", oninput: debounce((e) => this.set({ q: e.target.value.trim() })) });
    tools.append(this.groupSel, this.scopeSel, this.search);
    this.note = h("div", { class: "ops-note kn-note", role: "status" });
    this.table = h("div", { class: "ops-table" });
    this.pager = h("div", { class: "ops-pager" });
    this.detail = h("div", { class: "kn-detail", "aria-live": "polite" });
    body.append(this.note, this.table, this.pager, this.detail);
  }

  render(doc) {
    this.doc = doc;
    this.body.dataset.state = doc.rows.length ? "ready" : "empty";
    const cols = COLUMNS.filter((c) => !c.byOp || doc.group === "op");
    const where = doc.step !== null ? `step ${stepLabel(doc.step)}` : "the whole span";
    const t = doc.totals;
    const dev = doc.device;
    fill(this.note,
      `${doc.total_rows} kernel group${doc.total_rows === 1 ? "" : "s"} in ${where}`,
      t.calls ? ` · ${t.calls} calls · ${dur(t.total_us)} of kernels` : null,
      t.total_us ? ` · ${Math.round((100 * t.tensor_core_us) / t.total_us)}% on Tensor Cores` : null,
      dev ? h("span", { class: "ops-hint", title: `limits from the trace: ${dev.limits_from_trace.join(", ") || "none (the compute capability's documented values)"}` },
        ` · ${dev.name || "device"}: cc ${dev.compute_capability}, ${dev.sms ?? "?"} SMs, ${dev.max_warps_per_sm} warps and ${dev.max_blocks_per_sm} blocks per SM`) : null,
      this.scope === "step" && this.step === null ? " (no step selected: the span)" : null,
      doc.theoretical_note ? h("span", { class: "ops-hint" }, ` · no theoretical occupancy: ${doc.theoretical_note}`) : null);
    if (!doc.rows.length) {
      const cpu = this.summary?.device?.kind === "cpu";
      fill(this.table, h("div", { class: "none" }, this.q.q ? `No kernel matches “${this.q.q}”.`
        : cpu ? "No kernels: a CPU-only trace. Profile with ProfilerActivity.CUDA to see the GPU's kernels." : "No kernels here."));
      fill(this.pager);
      fill(this.detail);
      return;
    }
    const sort = doc.sort || "-total_us";
    const [desc, key] = sort.startsWith("-") ? [true, sort.slice(1)] : [false, sort];
    const head = h("tr", null, cols.map((c) => h("th", {
      class: c.num ? "num" : "", scope: "col", title: c.title || null,
      "aria-sort": c.key === key ? (desc ? "descending" : "ascending") : null,
    }, c.nosort ? c.label : h("button", { onclick: () => this.sortBy(c.key, key, desc), title: `sort by ${c.label}` }, c.label))));
    this.tbody = h("tbody", { onkeydown: (e) => this.key(e) },
      doc.rows.map((r, i) => h("tr", {
        tabindex: i ? -1 : 0, "aria-selected": "false", onclick: () => this.open(i),
        title: `${r.name}\nclick or Enter: its first kernels in the timeline · o: its launching ops`,
      }, cols.map((c) => h("td", { class: c.num ? "num" : c.key === "name" || c.key === "op" ? "ops-name" : "kn-cell" }, this.cell(r, c))))));
    fill(this.table, h("table", { class: "data ops kn-table", "aria-label": "kernels" }, h("thead", null, head), this.tbody));
    this.renderPager(doc);
    fill(this.detail);
  }

  cell(r, c) {
    const v = r[c.key];
    if (c.key === "name") return shortName(v, 60);
    if (c.key === "op") return v ? shortName(v, 40) : "—";
    if (c.dims) return h("span", { title: r.configs > 1 ? `the commonest of ${r.configs} configurations (${r.config_calls} of ${r.calls} calls)` : null },
      dims(v), c.key === "block" && r.configs > 1 ? h("sup", { class: "kn-more" }, ` +${r.configs - 1}`) : null);
    if (c.occ) return this.occupancy(r);
    if (c.key === "tensor_core") return r.tensor_core === "some" ? h("span", { class: "kn-tc some" }, "some") : r.tensor_core ? h("span", { class: "kn-tc" }, "yes") : h("span", { class: "muted" }, "no");
    if (c.key === "precision") return v || "—";
    if (v === null || v === undefined) return "—";
    if (c.int) return String(v);
    if (c.bytes) return v ? bytes(v) : "0";
    if (c.pct) return `${v.toFixed(v < 10 ? 1 : 0)}%`;
    return c.dur ? dur(v) : ms(v);
  }

  occupancy(r) {
    const theo = r.theoretical_occupancy_pct;
    const why = theo === null || theo === undefined ? r.theoretical_note
      : `theoretical ${theo}%: ${r.theoretical_blocks_per_sm} block(s) per SM, limited by ${(r.occupancy_limited_by || []).join(" and ")}`;
    const capped = r.blocks_per_sm !== null && r.theoretical_blocks_per_sm && r.blocks_per_sm < r.theoretical_blocks_per_sm;
    const title = [why, r.occupancy_pct !== null ? `recorded ${r.occupancy_pct}%${capped ? `: the grid fills ${r.blocks_per_sm} block(s) per SM` : ""}` : "not recorded"].filter(Boolean).join("\n");
    return h("span", { class: "kn-occ", title }, pct0(r.occupancy_pct), h("span", { class: "muted" }, ` / ${pct0(theo)}`));
  }

  sortBy(col, key, desc) {
    // A new column starts descending (the biggest first); the same one flips.
    const down = col === key ? !desc : !["name", "op"].includes(col);
    this.set({ sort: `${down ? "-" : ""}${col}` });
  }

  renderPager(doc) {
    const last = doc.offset + doc.rows.length;
    const go = (off) => { this.q = { ...this.q, offset: off }; this.load(); };
    fill(this.pager, doc.total_rows > PAGE ? [
      h("button", { disabled: doc.offset === 0, onclick: () => go(Math.max(doc.offset - PAGE, 0)) }, "‹ previous"),
      ` ${doc.offset + 1}–${last} of ${doc.total_rows} `,
      h("button", { disabled: last >= doc.total_rows, onclick: () => go(last) }, "next ›")] : []);
  }

  key(e) {
    if (e.key === "o" || e.key === "O") {
      const at = [...this.tbody.children].indexOf(document.activeElement);
      if (at >= 0) { e.preventDefault(); this.openOps(at); }
      return;
    }
    rowKeys(e, this.tbody, (i) => this.open(i));
  }

  mark(i) {
    [...this.tbody.children].forEach((tr, k) => tr.setAttribute("aria-selected", k === i ? "true" : "false"));
  }

  /** The group's first kernels in the timeline (their step selected). */
  open(i) {
    const r = this.doc.rows[i];
    this.mark(i);
    this.renderDetail(r, i);
    if (r.rows?.length) this.ctx.openOp({ rows: r.rows, steps: r.steps });
  }

  /** The ops that launched the group's first kernels, in the dispatch chain. */
  openOps(i) {
    const r = this.doc.rows[i];
    this.mark(i);
    this.renderDetail(r, i);
    if (r.op_rows?.length) this.ctx.openOp({ rows: r.op_rows, steps: r.op_steps });
  }

  renderDetail(r, i) {
    const ops = r.ops || (r.op ? [{ name: r.op, calls: r.calls }] : []);
    fill(this.detail,
      h("div", { class: "kn-line" }, h("strong", null, shortName(r.name, 90)),
        ` · streams ${r.streams.join(", ") || "—"}`,
        r.configs > 1 ? ` · ${r.configs} launch configurations, the one shown in ${r.config_calls} of ${r.calls} calls` : null),
      ops.length ? h("div", { class: "kn-line" }, "Launched by ", ops.map((o, k) => [k ? ", " : "",
        h("button", { class: "ops-chip", title: "open its first launches in the dispatch chain", onclick: () => this.openOps(i) }, `${shortName(o.name, 50)} ×${o.calls}`)])) : null);
  }
}
