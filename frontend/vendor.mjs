// Copy the pinned chart library from node_modules into the package's static
// folder. The tab has no build step: plugin/tb_diagnostics/static/ is served
// as it is, and the vendored files are committed so that `pip install` needs
// no Node. Run after changing the version in package.json:
//
//   cd frontend && npm install && npm run vendor
//
// tests/test_tb_plugin_static.py checks the committed copies against
// vendor-manifest.json, and byte for byte against what `npm ci` installs
// when node_modules is present.
import { createHash } from "node:crypto";
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const FILES = {
  "node_modules/uplot/dist/uPlot.esm.js": "uplot/uPlot.esm.js",
  "node_modules/uplot/dist/uPlot.min.css": "uplot/uPlot.min.css",
  "node_modules/uplot/LICENSE": "uplot/LICENSE",
};
const out = join(here, "..", "plugin", "tb_diagnostics", "static", "vendor");
const version = JSON.parse(readFileSync(join(here, "node_modules/uplot/package.json"))).version;
const manifest = { uplot: { version, files: {} } };
for (const [src, dst] of Object.entries(FILES)) {
  mkdirSync(dirname(join(out, dst)), { recursive: true });
  copyFileSync(join(here, src), join(out, dst));
  manifest.uplot.files[dst] = createHash("sha256").update(readFileSync(join(out, dst))).digest("hex");
  console.log(`vendored ${dst}`);
}
// The checksums let the test verify the vendored copies without node_modules.
writeFileSync(join(here, "vendor-manifest.json"), `${JSON.stringify(manifest, null, 2)}\n`);
