// Ranks × steps heat map of a distributed run (from /run): one row per rank, one
// column per step, coloured by step time or by exposed communication; a click opens
// that rank's step. A plain canvas: a few hundred cells need no chart library.

import { card, fill, h } from "./dom.js";
import { cssVar, dur, pct } from "./format.js";

const CELL_W = 36;
const CELL_H = 22;
const LEFT = 78; // rank labels
const TOP = 18; // step labels
const METRICS = {
  wall: { label: "step time", value: (c) => c.wall_us, text: (c) => dur(c.wall_us) },
  exposed: {
    label: "exposed comm",
    value: (c) => (c.wall_us > 0 ? c.exposed_comm_us / c.wall_us : 0),
    text: (c) => `${dur(c.exposed_comm_us)} (${pct(c.wall_us > 0 ? c.exposed_comm_us / c.wall_us : 0)})`,
  },
};

export class RanksView {
  /** `onFindings(list)`: the run's run-level findings, also listed in the Findings card. */
  constructor({ onOpen, onFindings }) {
    this.onOpen = onOpen;
    this.onFindings = onFindings;
    this.metric = "wall";
    this.select = h("select", { "aria-label": "heat map metric", onchange: () => { this.metric = this.select.value; this.draw(); } },
      Object.entries(METRICS).map(([k, m]) => h("option", { value: k }, m.label)));
    const c = card("Ranks × steps", { id: "ranks", tools: this.select });
    this.el = c.el;
    this.el.hidden = true;
    // Focusable: arrow keys move a cursor cell, Enter opens it (the keyboard twin of a click).
    this.canvas = h("canvas", { id: "rank-heatmap", role: "img", tabindex: "0",
      "aria-label": "ranks by steps heat map: arrow keys choose a cell, Enter opens it" });
    this.cursor = { i: 0, j: 0 };
    this.canvas.addEventListener("keydown", (e) => this.key(e));
    this.canvas.addEventListener("focus", () => this.describe());
    this.canvas.addEventListener("blur", () => this.draw());
    this.info = h("div", { class: "heat-info" }, "click a cell to open that rank's step");
    this.findings = h("div", { class: "run-findings" });
    c.body.append(this.canvas, this.info, this.findings);
    this.canvas.addEventListener("mousemove", (e) => this.hover(e));
    this.canvas.addEventListener("click", (e) => {
      const hit = this.cellAt(e);
      if (hit) this.onOpen(hit.rank, hit.cell);
    });
  }

  /** Show the run's table (hidden unless it has at least two ranks). */
  setData(res) {
    const ranks = res?.ranks || [];
    this.ranks = ranks;
    this.onFindings?.(ranks.length < 2 ? [] : res.findings || []);
    this.el.hidden = ranks.length < 2;
    if (this.el.hidden) return;
    this.steps = [...new Set(ranks.flatMap((r) => r.steps.map((c) => c.step)))].sort((a, b) => a - b);
    fill(this.findings, (res.findings || []).map((f) =>
      h("div", { class: `run-finding ${f.severity}` }, h("b", null, `${f.rule}: `), f.message,
        (f.cells || []).length ? h("div", { class: "run-cells" }, f.cells.map((c) =>
          h("button", { type: "button", class: "run-cell", title: `open ${c.worker}, span ${c.span}, step ${c.step}`,
            onclick: () => this.openCell(c) },
            h("span", { class: "where" }, `rank ${c.rank} · step ${c.step}`), h("span", { class: "why" }, c.why)))) : null)));
    this.draw();
  }

  /** A run finding's evidence: open that rank's step, as a click on its cell does. */
  openCell(c) {
    const rank = this.ranks.find((r) => r.rank === c.rank && r.worker === c.worker);
    const cell = rank?.steps.find((x) => x.step === c.step);
    if (cell) this.onOpen(rank, cell);
  }

  draw() {
    if (!this.ranks || this.el.hidden) return;
    const m = METRICS[this.metric];
    const cells = this.ranks.flatMap((r) => r.steps);
    const values = cells.map(m.value);
    const lo = Math.min(...values);
    const hi = Math.max(...values);
    const dpr = window.devicePixelRatio || 1;
    const w = LEFT + this.steps.length * CELL_W;
    const ht = TOP + this.ranks.length * CELL_H;
    Object.assign(this.canvas, { width: w * dpr, height: ht * dpr });
    Object.assign(this.canvas.style, { width: `${w}px`, height: `${ht}px` });
    const ctx = this.canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, ht);
    ctx.font = "11px sans-serif";
    ctx.fillStyle = cssVar("--muted") || "#888";
    ctx.textBaseline = "middle";
    this.steps.forEach((s, j) => ctx.fillText(`#${s}`, LEFT + j * CELL_W + 4, TOP / 2));
    const hot = cssVar(this.metric === "wall" ? "--c-launch" : "--c-comm") || "#d33";
    this.ranks.forEach((r, i) => {
      ctx.fillStyle = cssVar("--fg") || "#333";
      ctx.fillText(`rank ${r.rank}`, 4, TOP + i * CELL_H + CELL_H / 2);
      for (const c of r.steps) {
        const j = this.steps.indexOf(c.step);
        const t = hi > lo ? (m.value(c) - lo) / (hi - lo) : 0.5;
        ctx.globalAlpha = 0.15 + 0.85 * t;
        ctx.fillStyle = hot;
        ctx.fillRect(LEFT + j * CELL_W + 1, TOP + i * CELL_H + 1, CELL_W - 2, CELL_H - 2);
        ctx.globalAlpha = 1;
      }
    });
    if (document.activeElement === this.canvas) {
      ctx.strokeStyle = cssVar("--focus") || "#1976d2";
      ctx.lineWidth = 2;
      ctx.strokeRect(LEFT + this.cursor.j * CELL_W + 1, TOP + this.cursor.i * CELL_H + 1, CELL_W - 2, CELL_H - 2);
    }
  }

  key(e) {
    if (!this.ranks?.length) return;
    const moves = { ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0] };
    if (moves[e.key]) {
      const [di, dj] = moves[e.key];
      this.cursor.i = Math.max(0, Math.min(this.ranks.length - 1, this.cursor.i + di));
      this.cursor.j = Math.max(0, Math.min(this.steps.length - 1, this.cursor.j + dj));
      this.draw();
      this.describe();
      e.preventDefault();
    } else if (e.key === "Enter") {
      const hit = this.cellOf(this.cursor.i, this.cursor.j);
      if (hit) this.onOpen(hit.rank, hit.cell);
      e.preventDefault();
    }
  }

  describe() {
    this.show(this.cellOf(this.cursor.i, this.cursor.j));
    if (document.activeElement === this.canvas) this.draw();
  }

  cellOf(i, j) {
    const rank = this.ranks?.[i];
    const step = this.steps?.[j];
    const cell = rank?.steps.find((c) => c.step === step);
    return cell ? { rank, cell } : null;
  }

  cellAt(e) {
    const r = this.canvas.getBoundingClientRect();
    const j = Math.floor((e.clientX - r.left - LEFT) / CELL_W);
    const i = Math.floor((e.clientY - r.top - TOP) / CELL_H);
    return this.cellOf(i, j);
  }

  hover(e) {
    this.show(this.cellAt(e));
  }

  show(hit) {
    this.info.textContent = hit
      ? `rank ${hit.rank.rank} · step ${hit.cell.step}: step ${dur(hit.cell.wall_us)}, comm ${dur(hit.cell.comm_us)}, exposed ${METRICS.exposed.text(hit.cell)}`
      : "click a cell to open that rank's step";
  }
}
