// Entry point of the Diagnostics tab. TensorBoard's plugin_entry.html does
// `import("./index.js").then((m) => m.render())` inside an iframe whose
// <base href> is data/plugin/diagnostics/; every URL below is relative to it.
// Plain ES modules, no build step: what is in static/ is what is served.

const STYLES = ["./static/vendor/uplot/uPlot.min.css", "./static/style.css"];

function stylesheet(href) {
  return new Promise((resolve) => {
    const link = document.createElement("link");
    link.rel = "stylesheet";
    link.href = href;
    link.onload = link.onerror = resolve;
    document.head.append(link);
  });
}

export async function render() {
  document.title = "Diagnostics";
  const meta = document.createElement("meta");
  meta.name = "viewport";
  meta.content = "width=device-width, initial-scale=1";
  document.head.append(meta);
  await Promise.all(STYLES.map(stylesheet));
  const root = document.createElement("div");
  root.id = "app";
  document.body.append(root);
  const { App } = await import("./static/app/main.js");
  const app = new App(root);
  await app.loadRuns();
  return app;
}
