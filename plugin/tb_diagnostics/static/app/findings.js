// Findings, grouped by severity and sorted by estimated savings. Each one
// expands to its message, its evidence (click: show the event in the
// timeline), the rule's why / how-to-fix and how to confirm it.

import { h, paragraphs, richText } from "./dom.js";
import { dur, ranges, shortName } from "./format.js";

const SEVERITIES = ["critical", "warning", "info"];

export function findingKey(f, i) {
  return `${f.rule}.${i}`;
}

export class FindingsView {
  constructor(container, { onEvidence, onToggle }) {
    this.container = container;
    this.onEvidence = onEvidence;
    this.onToggle = onToggle;
    this.open = null;
  }

  setData(summary, openKey) {
    this.summary = summary;
    this.open = openKey || null;
    this.render();
  }

  count() {
    return this.summary ? this.summary.findings.length : 0;
  }

  render() {
    const s = this.summary;
    const all = s.findings.map((f, i) => ({ f, key: findingKey(f, i) }));
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
        items.map((x) => this.item(x.f, x.key)));
    });
    this.container.replaceChildren(...groups.filter(Boolean));
  }

  item(f, key) {
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
        f.artefact ? h("span", { class: "badge artefact" }, "profiler artefact") : null),
      h("div", { class: "fsub" }, [f.rule, steps].filter(Boolean).join(" · "))),
    h("span", { class: "fsave" }, save));
    const el = h("div", { class: `finding${isOpen ? " open" : ""}`, dataset: { key } }, head);
    if (isOpen) el.append(this.body(f, key));
    return el;
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
