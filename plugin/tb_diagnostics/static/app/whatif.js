// The "What if" card: each change the backend can replay on this span
// (summary.whatif), as one step's wall time before the change (a grey bar) and after it
// (a coloured one), replayed, on one scale shared by every bar. The saving beside it is
// what the warm steps save together, per step (the number the proposing findings give),
// with their total, and where the steps that finish sooner only wait longer in the next,
// how much of their saving moves. The bars are the step the backend names for that saving
// (`shown_step`: its own saving is the nearest the per-step one), named; a step the user
// selects shows its own bars and its own saving, labelled as that step's. "all" (every
// change at once) comes first: its saving is not the sum of the others. Each projection
// names the rules whose change it is or is part of that have findings here (a rule's
// button opens that finding in the findings card); its parts (one finding's change each,
// a sync site of "syncs") with the finding's own saving, the same number the finding
// gives; and, muted, the related rules, which name the problem but claim no number of it.

import { h } from "./dom.js";
import { findingKey } from "./findings.js";
import { dur, ms, ranges } from "./format.js";

/** The after bar's colour: the idle cause or the kind of work the change removes. */
const COLOR = {
  all: "var(--wi-all)",
  input: "var(--c-input)",
  syncs: "var(--c-sync)",
  profiler: "var(--c-profiler)",
  fusion: "var(--k-kernel)",
  amp: "var(--rf-bf16)",
  launch: "var(--c-launch)",
  graphs: "var(--k-runtime)",
};
const ALL_NOTE = "Savings do not add up: the changes overlap, and the device work they leave still takes its time.";
const SEVERITIES = ["critical", "warning", "info"];

/** `all` first, then the biggest saving first (the backend's order breaks ties). */
export function ordered(list) {
  return (list || []).map((p, i) => ({ p, i })).sort((a, b) =>
    (b.p.id === "all") - (a.p.id === "all") || (b.p.saves_us || 0) - (a.p.saves_us || 0) || a.i - b.i)
    .map((x) => x.p);
}

/** Whether a projection's figures are per span (a span without steps: `steps: [null]`). */
const perSpan = (p) => !(p.steps || []).some((s) => s !== null && s !== undefined);

/** Milliseconds with their unit; a saving under 10 µs keeps its digits ("4.2 µs"). */
function msUnit(us) {
  return us > 0 && us < 10 ? dur(us) : `${ms(us)} ms`;
}

/** "saves 59.0 ms/step", "saves 4.40 ms per span", "no measurable saving". */
export function savesText(p) {
  if (!(p.saves_us > 0)) return "no measurable saving";
  return `saves ${msUnit(p.saves_us)}${perSpan(p) ? " per span" : "/step"}`;
}

/** "99.0 ms over 26 warm steps": the total the per-step saving divides (several steps). */
export function totalText(p) {
  const n = (p.steps || []).filter((s) => s !== null && s !== undefined).length;
  if (n < 2 || !(p.saves_us_total > 0)) return "";
  return `${msUnit(p.saves_us_total)} over ${n} warm steps`;
}

/** Under a selected step's own saving, the warm steps' (labelled): "warm steps: 59.0 ms/step". */
export function warmText(p) {
  return `warm steps: ${p.saves_us > 0 ? `${msUnit(p.saves_us)}/step` : "no measurable saving"}`;
}

/** Where the steps that finish sooner only wait longer in others: how much moves. */
export function movesText(p) {
  if (!p.saving_moves || !(p.moves_us > 0)) return "";
  return `${msUnit(p.moves_us)} of the per-step savings move into other steps' waits`;
}

/** One step's own saving, labelled as that step's: "step 9 saves 0.91 ms", "step 9: 1.41 ms longer". */
export function stepSavesText(step, before, after) {
  const d = before - after;
  const who = step === null || step === undefined ? "the span" : `step ${step}`;
  if (d >= 0.05) return `${who} saves ${msUnit(d)}`;
  if (d <= -0.05) return `${who}: ${msUnit(-d)} longer`;
  return `${who}: no measurable saving`;
}

function stepsText(p) {
  if (perSpan(p)) return "the whole span (it has no steps)";
  const real = p.steps.filter((s) => s !== null && s !== undefined);
  return `${real.length > 1 ? "per step over warm steps" : "warm step"} ${ranges(real)}`;
}

/** `all`'s note: the parenthesis of its `change` sentence, else ours. */
function allNote(p) {
  const m = /\(([^()]+)\)\s*\.?\s*$/.exec(p.change || "");
  if (!m) return ALL_NOTE;
  const t = m[1].trim();
  return `${t[0].toUpperCase()}${t.slice(1)}${/[.!]$/.test(t) ? "" : "."}`;
}

export class WhatIfView {
  constructor(container, tools, { onFinding }) {
    this.container = container;
    this.tools = tools;
    this.onFinding = onFinding;
    this.step = null;
  }

  /** Show the bars and the saving of step number `step` (null: each card's shown step). */
  select(step) {
    if (step === this.step) return;
    this.step = step;
    if (this.summary) this.render();
  }

  setData(summary) {
    this.summary = summary;
    this.render();
  }

  /**
   * The walls a row draws: the selected step's (`own`: its saving is shown), else the step
   * the backend names for the card's saving.
   */
  walls(p) {
    const one = this.step === null ? null : (p.per_step || []).find((x) => x.step === this.step);
    if (one) return { before: one.before_us, after: one.after_us, step: this.step, own: true };
    const before = p.shown_before_us ?? 0;
    return { before, after: p.shown_after_us ?? before, step: p.shown_step ?? null, own: false };
  }

  render() {
    const summary = this.summary;
    const list = ordered(summary.whatif);
    this.container.dataset.count = String(list.length);
    if (!list.length) {
      this.tools.replaceChildren();
      this.container.replaceChildren(this.emptyState(summary));
      return;
    }
    // One scale for every bar: the longest wall drawn.
    const scale = Math.max(...list.flatMap((p) => { const w = this.walls(p); return [w.before, w.after]; }), 1);
    const first = list.find((p) => p.id === "all") || list[0];
    const own = this.walls(first).own;
    this.container.dataset.step = own ? String(this.step) : "";
    this.tools.replaceChildren(
      h("span", { class: "legend", style: { padding: 0 } },
        h("span", null, h("i", { class: "wi-key before" }), "now"),
        h("span", null, h("i", { class: "wi-key after" }), "after the change")),
      h("span", {
        class: "wi-basis",
        title: own ? "bars share one scale; each figure is this step's own saving, the warm steps' below it"
          : "bars share one scale; each card draws the warm step whose own saving is nearest its per-step saving",
      }, own ? `bars and savings: step ${this.step}` : `savings: ${stepsText(first)} · bars: the step named`));
    const comm = commNote(summary);
    this.container.replaceChildren(h("ol", { class: "wi-list", "aria-label": "what each change would save" },
      list.map((p) => this.row(p, scale))), ...(comm ? [h("div", { class: "wi-comm muted", id: "whatif-comm" }, comm)] : []));
  }

  emptyState(s) {
    const cpu = s.device?.kind === "cpu";
    const comm = commNote(s);
    // Where waiting in collectives is what the steps lose, say why that is not replayed.
    if (comm) return h("div", { class: "none", id: "whatif-empty" }, comm);
    return h("div", { class: "none", id: "whatif-empty" },
      h("strong", null, "Nothing to replay. "),
      s.whatif === undefined
        ? "This tb-diagnostics build does not replay changes."
        : `Nothing in this span has a change the replay can model${cpu ? " (a CPU-only trace with no DataLoader wait)" : ""}.`,
      h("div", { class: "muted", style: { marginTop: "4px" } },
        "It replays: no DataLoader wait, no blocking syncs, no profiler overhead, cheaper launches or CUDA graphs, fused memory-bound chains, fp32 GEMMs in bf16."));
  }

  row(p, scale) {
    const all = p.id === "all";
    const { before, after, step, own } = this.walls(p);
    const w = (us) => `${Math.min(Math.max((us / scale) * 100, 0), 100).toFixed(2)}%`;
    const named = step === null ? "" : `step ${step}: `;
    const save = own ? stepSavesText(step, before, after) : savesText(p);
    // Under a selected step's own figure, the warm steps' (labelled): never unnamed.
    const span = [own ? warmText(p) : null, totalText(p), movesText(p)].filter(Boolean);
    const title = [`Assumes: ${p.assumes || "—"}`, `Steps used: ${stepsText(p)}`,
      `${named}now ${msUnit(before)} → after ${msUnit(after)}${own ? "" : " (the warm step whose own saving is nearest the per-step one)"}`,
      `${savesText(p)} (the warm steps' savings added up, over their number)`,
      totalText(p) ? `in all: ${totalText(p)}` : null, movesText(p) || null].filter(Boolean).join("\n");
    return h("li", {
      class: `wi-row${all ? " wi-all" : ""}`, id: `whatif-${p.id}`,
      dataset: { id: p.id, before: String(before), after: String(after), saves: String(p.saves_us ?? ""), step: step === null ? "" : String(step) },
      style: { "--wi": COLOR[p.id] || "var(--accent)" },
    },
    h("div", { class: "wi-label" },
      h("div", { class: "wi-change" }, all ? "Every change below, together" : p.change),
      all ? h("div", { class: "wi-note" }, allNote(p)) : null),
    this.rules(p),
    h("div", {
      class: "wi-bars", title, role: "img",
      "aria-label": `${all ? "every change" : p.change}: ${named}${ms(before)} ms now, ${ms(after)} ms after; ${save}`,
    },
    h("div", { class: "wi-bar before", style: { width: w(before) } }),
    h("div", { class: "wi-bar after", style: { width: w(after) } })),
    h("div", { class: "wi-nums" },
      h("div", { class: "wi-ba" }, `${named}${ms(before)} → ${ms(after)} ms`),
      h("div", { class: `wi-save${(own ? before - after >= 0.05 : p.saves_us > 0) ? "" : " zero"}` }, save),
      span.map((t) => h("div", {
        class: t === movesText(p) ? "wi-total wi-moves" : "wi-total",
        style: { whiteSpace: "normal" },
      }, t))));
  }

  /** The span's findings with their keys (the findings card's). */
  findings() {
    return (this.summary.findings || []).map((f, i) => ({ f, key: findingKey(f, i) }));
  }

  /** One button per rule with findings here, opening its top finding. */
  buttons(rules, related) {
    const findings = this.findings();
    const rank = (x) => SEVERITIES.indexOf(x.f.severity) * 1e15 - (x.f.savings_us || 0);
    return (rules || []).map((rule) => {
      const mine = findings.filter((x) => x.f.rule === rule).sort((a, b) => rank(a) - rank(b));
      if (!mine.length) return null;
      const top = mine[0].f;
      const save = !related && top.savings_us > 0 ? ` (saves ~${dur(top.savings_us)}${perSpan(top) ? " per span" : "/step"})` : "";
      const why = related ? "\nrelated: it names the problem this change fixes, but claims no saving of it" : "";
      return h("button", {
        type: "button", class: `wi-rule${related ? " wi-related" : ""}`, dataset: { rule, key: mine[0].key },
        title: `open the finding: ${top.title}${save}${mine.length > 1 ? `\n${mine.length} findings of this rule; the first is opened` : ""}${why}`,
        style: related ? { opacity: 0.75, borderStyle: "dashed" } : null,
        onclick: () => this.onFinding(mine[0].key),
      }, h("span", { class: "dot", style: { "--sev": `var(--sev-${top.severity})` } }), rule,
      mine.length > 1 ? h("span", { class: "wi-count" }, `×${mine.length}`) : null);
    }).filter(Boolean);
  }

  /** The rules whose change this is or is part of, its parts, then the related rules. */
  rules(p) {
    const own = this.buttons(p.rules, false);
    const parts = partsList(p, this.findings(), this.onFinding);
    const related = this.buttons(p.related, true);
    if (!own.length && !parts && !related.length) {
      return h("div", { class: "wi-rules muted" }, p.id === "all" ? "" : "no finding in this span proposes it");
    }
    return h("div", { class: "wi-rules" }, own, parts,
      related.length ? h("span", { class: "muted wi-related-label" }, "related:") : null, related);
  }
}

/** "host-sync · aten::item → cudaMemcpyAsync: alone 154 µs/step (2.58 ms in all)". */
export function partText(part) {
  const who = part.subject ? `${part.rule} · ${part.subject}` : part.rule;
  const per = perSpan(part) ? " per span" : "/step";
  const saves = part.saves_us > 0 ? `alone saves ${msUnit(part.saves_us)}${per}` : "alone: no measurable saving";
  const many = (part.steps || []).filter((s) => s !== null && s !== undefined).length > 1;
  const total = many && part.saves_us_total > 0 ? ` (${msUnit(part.saves_us_total)} in all)` : "";
  return `${who}: ${saves}${total}`;
}

/**
 * A card's parts: each the change of one finding, replayed alone, with that finding's
 * saving (the number the finding gives). They do not add up to the card.
 */
function partsList(p, findings, onFinding) {
  const parts = p.parts || [];
  if (!parts.length) return null;
  const items = parts.map((part) => {
    const match = findings.find((x) => x.f.rule === part.rule && (x.f.subject ?? null) === (part.subject ?? null));
    const text = partText(part);
    return h("li", { class: "wi-part", dataset: { rule: part.rule, saves: String(part.saves_us) } },
      match ? h("button", {
        type: "button", class: "wi-rule", dataset: { key: match.key },
        title: `open the finding: ${match.f.title}`, onclick: () => onFinding(match.key),
      }, text) : text);
  });
  const whole = parts.length === 1 && parts[0].saves_us === p.saves_us;
  const note = whole ? "part:" : "parts, each replayed alone (they do not add up to the card, which replays its whole change at once, what no finding names included):";
  return h("div", { class: "wi-parts", style: { flexBasis: "100%" } },
    h("span", { class: "muted" }, note),
    h("ul", { style: { margin: "2px 0", paddingLeft: "16px", listStyle: "none" } }, items));
}

/** The median of `xs` (0 for none). */
function median(xs) {
  const v = [...xs].sort((a, b) => a - b);
  return v.length ? (v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2) : 0;
}

/**
 * Why exposed communication is not replayed, where the span's exposed-communication
 * finding says it is what the steps lose (the rule decides; null otherwise): part of that
 * time is this rank waiting in the collective for the others, and one rank's trace cannot
 * replay another's.
 */
export function commNote(s) {
  const f = (s.findings || []).find((x) => x.rule === "exposed-communication");
  if (!f) return null;
  const warm = (s.steps || []).filter((x) => !x.cold && x.wall_us > 0);
  const per = median(warm.map((x) => x.exposed_comm_us || 0));
  const share = median(warm.map((x) => (x.exposed_comm_us || 0) / x.wall_us));
  const ranks = s.distributed?.world_size > 1;
  return [
    h("strong", null, "Communication is not replayed. "),
    `${per > 0 ? `${msUnit(per)} of the median warm step (${Math.round(share * 100)}%) is` : "The steps lose time to"} communication not hidden by compute. `,
    "Part of it is this rank waiting in the collective for the other ranks, and one rank's trace cannot replay another's: ",
    "how much a change would save depends on when the others arrive. ",
    ranks ? "The run-level findings (in Findings, and the Ranks × steps card) say which rank holds the others back." : "Profile every rank to see which one holds the others back.",
  ];
}
