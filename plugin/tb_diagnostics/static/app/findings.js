// Findings, grouped by severity and sorted by estimated savings. Each one
// expands to its message, its evidence (click: show the event in the
// timeline), the rule's why / how-to-fix and how to confirm it. A distributed
// run's run-level findings (from /run: a straggler rank, imbalanced collectives)
// are listed and counted with the span's, marked "run-level"; their evidence is
// rank × step cells (click: open that rank's step).

import { h, paragraphs, richText } from "./dom.js";
import { dur, ranges, shortName } from "./format.js";

const SEVERITIES = ["critical", "warning", "info"];

export function findingKey(f, i) {
  return `${f.rule}.${i}`;
}

/** A run-level finding's key: never one of the span's (those are "rule.i"). */
export function runFindingKey(f, i) {
  return `run:${f.rule}.${i}`;
}

export class FindingsView {
  /** `countEl`: the card header's count; `onCell(cell)`: a run-level finding's rank × step cell. */
  constructor(container, { onEvidence, onToggle, onCell, countEl }) {
    this.container = container;
    this.onEvidence = onEvidence;
    this.onToggle = onToggle;
    this.onCell = onCell;
    this.countEl = countEl;
    this.open = null;
    this.runFindings = [];
  }

  /** The span's findings; `openKey` opens one (a key of neither list opens nothing). */
  setData(summary, openKey) {
    this.summary = summary;
    this.open = openKey || null;
    this.render();
  }

  /** The run's run-level findings (the /run route's; [] for none or another run). */
  setRun(findings) {
    this.runFindings = findings || [];
    if (this.summary) this.render();
  }

  /** Every finding shown, the span's and the run's, with its key. */
  entries() {
    const span = this.summary.findings.map((f, i) => ({ f, key: findingKey(f, i) }));
    return [...span, ...this.runFindings.map((f, i) => ({ f, key: runFindingKey(f, i), run: true }))];
  }

  render() {
    const s = this.summary;
    const all = this.entries();
    const runLevel = all.filter((x) => x.run).length;
    if (this.countEl) {
      this.countEl.textContent = all.length
        ? `${all.length}${runLevel ? ` (${runLevel} run-level)` : ""} · by severity, then savings` : "";
    }
    if (!all.length) {
      const rules = s.errors.length ? "The span could not be analysed." :
        "No rule found anything to report for this span.";
      this.container.replaceChildren(h("div", { class: "none" },
        h("strong", null, "No findings. "), rules,
        h("div", { class: "muted", style: { marginTop: "6px" } },
          richText("The verdict above still says what bounds each step; `tb-diagnostics rules` lists what the rules look for."))));
      return;
    }
    const groups = SEVERITIES.map((sev) => {
      const items = all.filter((x) => x.f.severity === sev)
        .sort((a, b) => (b.f.savings_us || 0) - (a.f.savings_us || 0));
      if (!items.length) return null;
      return h("div", { class: "sev-group", style: { "--sev": `var(--sev-${sev})` } },
        h("h3", null, h("span", { class: "dot" }), `${sev} · ${items.length}`),
        items.map((x) => this.item(x.f, x.key, x.run)));
    });
    this.container.replaceChildren(...groups.filter(Boolean));
  }

  item(f, key, run = false) {
    const isOpen = this.open === key;
    const real = (f.steps || []).filter((x) => x !== null);
    // The replayed saving: per step, or over the span where the span has no steps.
    const spanHasSteps = (this.summary.steps || []).some((x) => x.step !== null && x.step !== undefined);
    const save = f.savings_us ? `saves ~${dur(f.savings_us)}${spanHasSteps ? "/step" : " over the span"}` : "";
    // A finding about more steps than the tab was sent names how many, and their range.
    const steps = f.steps_total && f.steps_range
      ? `${f.steps_total.toLocaleString()} steps, #${f.steps_range[0]}–#${f.steps_range[1]}`
      : real.length ? `${real.length > 1 ? "steps" : "step"} ${ranges(real)}` : "";
    const head = h("button", {
      class: "fhead", "aria-expanded": isOpen ? "true" : "false", dataset: { key },
      onclick: () => this.toggle(key),
    },
    h("span", { class: "dot", style: { "--sev": `var(--sev-${f.severity})` } }),
    h("span", null,
      // The subject tells apart findings of one rule (three host syncs, three ops).
      h("div", { class: "ftitle" }, f.title,
        f.subject ? h("span", { class: "fsubject" }, ` · ${f.subject}`) : null,
        f.artefact ? h("span", { class: "badge artefact" }, "profiler artefact") : null,
        run ? h("span", { class: "badge run-level", title: "found across the run's ranks, not in this span alone" }, "run-level") : null),
      h("div", { class: "fsub" }, [f.rule, run && f.ranks?.length ? `rank${f.ranks.length > 1 ? "s" : ""} ${ranges(f.ranks)}` : null, steps]
        .filter(Boolean).join(" · "))),
    h("span", { class: "fsave" }, save));
    const el = h("div", { class: `finding${isOpen ? " open" : ""}${run ? " run-level" : ""}`, dataset: { key } }, head);
    if (isOpen) el.append(run ? this.runBody(f) : this.body(f, key));
    return el;
  }

  /** A run-level finding: its message, the rank × step cells that show it, how to confirm. */
  runBody(f) {
    const cells = f.cells || [];
    return h("div", { class: "fbody" },
      paragraphs(f.message),
      cells.length ? [h("h4", null, `Evidence (${cells.length})`), h("ul", { class: "evidence" }, cells.map((c) => h("li", null,
        h("button", { type: "button", title: `open ${c.worker}, span ${c.span}, step ${c.step}`, onclick: () => this.onCell?.(c) },
          h("span", { class: "ename" }, `rank ${c.rank} · step ${c.step}`),
          h("span", { class: "emeta" }, c.worker),
          h("span", { class: "emeta" }, c.why)))))] : null,
      h("p", { class: "muted" }, "Found by comparing the run's ranks step by step (the Ranks × steps card above); one rank's trace alone cannot show it."),
      f.confirm ? [h("h4", null, "How to confirm"), paragraphs(f.confirm)] : null);
  }

  body(f) {
    const rule = (this.summary.rules || {})[f.rule] || {};
    const ev = f.evidence || [];
    const list = h("ul", { class: "evidence" }, ev.map((e) => h("li", null, h("button", {
      title: `${e.name}\n${e.lane}${e.note ? `\n${e.note}` : ""}\nclick: show in the timeline`,
      onclick: (evt) => {
        for (const b of evt.currentTarget.closest(".evidence").querySelectorAll("button")) b.classList.remove("active");
        evt.currentTarget.classList.add("active");
        this.onEvidence(f, e);
      },
    },
    h("span", { class: "ename" }, shortName(e.name, 90)),
    h("span", { class: "emeta" }, e.category),
    h("span", { class: "emeta" }, `${dur(e.dur)} · ${e.note || e.lane}`)))));
    return h("div", { class: "fbody" },
      paragraphs(f.message),
      ev.length ? [h("h4", null, `Evidence (${ev.length})`), list] : null,
      rule.why ? [h("h4", null, "Why it matters"), paragraphs(rule.why)] : null,
      rule.how ? [h("h4", null, "How to fix"), paragraphs(rule.how)] : null,
      f.confirm ? [h("h4", null, "How to confirm"), paragraphs(f.confirm)] : null);
  }

  /** Open one finding (from another card): scrolled to, and focused for the keyboard. */
  select(key) {
    this.open = key;
    this.render();
    const head = this.container.querySelector(`button.fhead[data-key="${CSS.escape(key)}"]`);
    head?.scrollIntoView({ block: "nearest" });
    head?.focus({ preventScroll: true });
  }

  toggle(key) {
    this.open = this.open === key ? null : key;
    this.render();
    this.container.querySelector(`button.fhead[data-key="${CSS.escape(key)}"]`)?.focus();
    this.onToggle(this.open);
  }
}
