// Tiny DOM helpers. Trace data (event names, file names, messages) is
// untrusted text: it only ever reaches the page through textContent and
// attribute setters here, never through an HTML parser (no *HTML properties).
// Shown text has each lone surrogate (a byte of a file name that is not UTF-8) as
// U+FFFD; attribute values (an option's value among them) stay exact.

import { shownName } from "./names.js";

export { shownName };

const SHOWN_ATTRIBUTES = new Set(["title", "aria-label", "placeholder"]);

/**
 * h("div", {class: "x", onclick: fn, dataset: {a: 1}}, "text", child, [more])
 * Strings become text nodes; null/undefined/false children are skipped.
 */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k === "style" && typeof v === "object") setStyle(el, v);
    else if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, SHOWN_ATTRIBUTES.has(k) ? shownName(v) : String(v));
  }
  append(el, children);
  return el;
}

/** Inline styles; custom properties (--x) need setProperty. */
export function setStyle(el, styles) {
  for (const [k, v] of Object.entries(styles)) {
    if (k.startsWith("--")) el.style.setProperty(k, v);
    else el.style[k] = v;
  }
  return el;
}

export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(shownName(c)));
  }
  return el;
}

/** Replace an element's children. */
export function fill(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

/** Text with `code` spans, from rule docstrings (backticks only; no HTML). */
export function richText(text) {
  const frag = document.createDocumentFragment();
  String(text || "").split("`").forEach((part, i) => {
    if (!part) return;
    frag.append(i % 2 ? h("code", null, part) : document.createTextNode(part));
  });
  return frag;
}

/** Paragraphs (blank-line separated) of richText. */
export function paragraphs(text, cls) {
  return String(text || "")
    .split(/\n\s*\n/)
    .map((p) => p.replace(/\s*\n\s*/g, " ").trim())
    .filter(Boolean)
    .map((p) => h("p", { class: cls }, richText(p)));
}

/** A card: titled section with an optional right-hand toolbar. */
export function card(title, { id, tools, cls } = {}) {
  const body = h("div", { class: "card-body" });
  const head = h("header", { class: "card-head" }, h("h2", null, title),
    h("div", { class: "card-tools" }, tools || []));
  const el = h("section", { class: `card ${cls || ""}`, id, "aria-label": title }, head, body);
  return { el, body, head };
}
