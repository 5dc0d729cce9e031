"""The tab's name helpers (static/app/names.js, state.js) keep a name that is not UTF-8
exact (issue 22, case 3): in the route queries it builds, which the plugin parses back,
and in the shared link's URL hash, which TensorBoard itself must still be able to parse.
Oracles are Python's ``quote``/``unquote`` with ``errors="surrogateescape"``.

The JavaScript runs in node, on the tab's own modules.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from urllib.parse import quote, unquote

import pytest
from werkzeug.test import EnvironBuilder
from werkzeug.wrappers import Request

from tb_diagnostics.output import displayable
from tb_diagnostics.tb_plugin import query_args

APP = Path(__file__).resolve().parents[1] / "plugin" / "tb_diagnostics" / "static" / "app"
NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="needs node to run the tab's JavaScript")

#: Names as the file system holds them: Latin-1, cut UTF-8, a UTF-8 surrogate, an overlong
#: form, characters the query syntax uses, an emoji, plain ASCII.
RAW = [b"caf\xe9", b"\xe2\x82X", b"\xed\xa0\x80", b"\xc0\xaf", b"a b+c&d=e%25;#?/",
       "w\u00f6rker \U0001f600".encode(), b"\xff\xfe", b"plain-run_1"]
NAMES = [raw.decode("utf-8", "surrogateescape") for raw in RAW]

_SCRIPT = """
import { encodeName, decodeName, queryString, shownName } from %(names)s;
import { stateEntries, stateOfHash } from %(state)s;
let raw = "";
process.stdin.on("data", (d) => { raw += d; });
process.stdin.on("end", () => {
  const { names, quoted } = JSON.parse(raw);
  const out = names.map((name, i) => {
    const entries = stateEntries({ run: name, worker: "w", span: "1" });
    let tensorboardParses = true;  // TensorBoard's own parse of its URL hash
    try {
      for (const e of entries) e.split("=").forEach(decodeURIComponent);
    } catch { tensorboardParses = false; }
    return {
      encoded: encodeName(name), decoded: decodeName(quoted[i]),
      query: queryString({ run: name, span: 1 }), shown: shownName(name),
      hashRun: stateOfHash(`#diagnostics&${entries.join("&")}`).run, tensorboardParses,
    };
  });
  process.stdout.write(JSON.stringify(out));
});
"""


@pytest.fixture(scope="module")
def results() -> list[dict[str, object]]:
    script = _SCRIPT % {"names": json.dumps((APP / "names.js").as_uri()),
                        "state": json.dumps((APP / "state.js").as_uri())}
    # json.dumps writes each lone surrogate as a \\udcXX escape, which JSON.parse keeps.
    stdin = json.dumps({"names": NAMES,
                        "quoted": [quote(n, safe="", errors="surrogateescape") for n in NAMES]})
    out = subprocess.run([NODE, "--input-type=module", "-e", script], input=stdin,
                         capture_output=True, text=True, check=True, timeout=60)
    return json.loads(out.stdout)


@pytest.mark.parametrize("i", range(len(NAMES)), ids=[repr(r) for r in RAW])
def test_names_round_trip_exactly(results, i):
    name, got = NAMES[i], results[i]
    assert unquote(got["encoded"], errors="surrogateescape") == name
    assert got["decoded"] == name
    assert got["shown"] == displayable(name)
    environ = EnvironBuilder().get_environ()
    environ["QUERY_STRING"] = got["query"].removeprefix("?")
    assert query_args(Request(environ)) == {"run": name, "span": "1"}


@pytest.mark.parametrize("i", range(len(NAMES)), ids=[repr(r) for r in RAW])
def test_shared_links_keep_names_and_tensorboard_parses_them(results, i):
    assert results[i]["hashRun"] == NAMES[i]
    assert results[i]["tensorboardParses"]


def test_a_latin1_byte_goes_out_as_itself(results):
    assert results[0]["encoded"] == "caf%E9"
    assert results[0]["query"] == "?run=caf%E9&span=1"
    assert results[0]["shown"] == "caf\ufffd"
