// The plugin's JSON routes. URLs are relative: the entry page's <base href>
// puts them under data/plugin/diagnostics/, which keeps --path_prefix and
// /experiment/<id>/ working.

import { queryString } from "./names.js";

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(t);
      reject(new DOMException("aborted", "AbortError"));
    }, { once: true });
  });
}

/**
 * GET a route; while it answers 202 (the span is loading) report the
 * progress and ask again, backing off from 150 ms to 1 s.
 */
export async function getJSON(route, params, { onProgress, signal } = {}) {
  const qs = params ? queryString(params) : "";
  let delay = 150;
  for (;;) {
    const res = await fetch(`./${route}${qs}`, { signal, headers: { Accept: "application/json" } });
    let body = null;
    try {
      body = await res.json();
    } catch {
      body = null;
    }
    if (res.status === 202) {
      onProgress?.(body && body.progress);
      await sleep(delay, signal);
      delay = Math.min(delay * 1.5, 1000);
      continue;
    }
    if (!res.ok) throw new ApiError(res.status, (body && body.error) || `${res.status} ${res.statusText}`);
    // A reply cut short (TensorBoard stopping, a proxy) is an error, not an empty answer.
    if (body === null) throw new ApiError(res.status, "the plugin sent no JSON");
    return body;
  }
}

export const isAbort = (e) => e && e.name === "AbortError";
