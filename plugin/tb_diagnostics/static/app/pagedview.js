// A card whose table is one page of a /view document (Operators, Kernels, Modules): the
// span-or-step scope, the query (group, sort, search, page) and the request with its
// abort and error state live here once; a view builds its tools and renders the page.

import { isAbort } from "./api.js";
import { fill, h } from "./dom.js";

export class PagedView {
  /** `query`: the view's own starting query keys (e.g. { group: "name" }). The subclass
   * sets `this.note` (where an error shows) and implements render(doc). */
  constructor(body, ctx, { title, query = {}, pageSize }) {
    this.body = body;
    this.ctx = ctx;
    this.title = title;
    this.pageSize = pageSize;
    this.q = { sort: null, q: "", offset: 0, ...query };
    this.scope = "span";
    this.step = null;
  }

  setSpan(summary) {
    this.summary = summary;
    this.step = null;
    this.set({ offset: 0 });
  }

  selectStep(st) {
    this.step = st ? st.step : null;
    if (this.scope === "step") this.set({});
  }

  set(patch) {
    this.q = { ...this.q, offset: 0, ...patch };
    this.load();
  }

  /** The request's parameters; a view adds its own (Operators: the module). */
  params() {
    const p = { offset: this.q.offset, limit: this.pageSize };
    if (this.q.group) p.group = this.q.group;
    if (this.q.sort) p.sort = this.q.sort;
    if (this.q.q) p.q = this.q.q;
    if (this.scope === "step" && this.step !== null) p.step = this.step;
    return p;
  }

  async load() {
    if (!this.summary) return;
    this.abort?.abort();
    this.abort = new AbortController();
    const p = this.params();
    this.body.dataset.state = "loading";
    try {
      this.render(await this.ctx.fetch(p, { signal: this.abort.signal }));
    } catch (e) {
      if (isAbort(e)) return;
      this.body.dataset.state = "error";
      fill(this.note, h("span", { class: "none" }, `${this.title}: ${e.message}`));
    }
  }
}
