"""Names are bytes first (issue 22, case 3): a run directory and a trace file whose names
are not UTF-8 (Latin-1 ``caf\\xe9``, listed by Python as ``'caf\\udce9'``) are listed,
analysed, linked and exported. JSON keeps them exact (``\\udce9`` escapes), text shows
U+FFFD, and a URL carries the original byte (``run=caf%E9``).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import msgspec
import pytest
from test_tb_plugin import BASE, get_ready, small_run, tb_app
from werkzeug.test import EnvironBuilder
from werkzeug.wrappers import Request

from conftest import TraceBuilder
from tb_diagnostics import output
from tb_diagnostics.cli import main
from tb_diagnostics.output import displayable, encode_json, json_text
from tb_diagnostics.tb_plugin import query_args

RUN = "caf\udce9"  # the run directory b"caf\xe9" as Python lists it
WORKER = "w\udcf6rker0"  # from the file b"w\xf6rker0.1.pt.trace.json"
FILE = f"{RUN}/{WORKER}.1.pt.trace.json"
SHOWN_RUN = "caf\ufffd"


@pytest.fixture
def latin1_logdir(tmp_path: Path) -> Path:
    """A log dir holding one run, ``caf\\xe9/w\\xf6rker0.1.pt.trace.json``, named in bytes."""
    logdir = tmp_path / "log"
    run = os.fsencode(logdir) + b"/caf\xe9"
    os.makedirs(run)
    trace = small_run(TraceBuilder(device_properties=[
        {"id": 0, "name": "Test GPU", "totalGlobalMem": 1}]))
    with open(run + b"/w\xf6rker0.1.pt.trace.json", "wb") as fh:
        fh.write(json.dumps(trace.document()).encode())
    return logdir


def _same_but_utf8(obj):
    """``obj`` with each escaped byte as the character of that code point ('\\udce9' → 'é'):
    the payload msgspec can encode, whose JSON must equal ours once the escapes match."""
    if isinstance(obj, str):
        return "".join(chr(ord(c) - 0xDC00) if 0xDC80 <= ord(c) <= 0xDCFF else c for c in obj)
    if isinstance(obj, dict):
        return {_same_but_utf8(k): _same_but_utf8(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_same_but_utf8(v) for v in obj]
    return obj


PAYLOAD = {"runs": [{"run": RUN, "x": math.nan, "inf": math.inf, "n": [1, 2.5, None, True],
                     f"key {WORKER}": ["a\"\\\x01\u2028é", "caf\udce9\udcff tail", (3, 4)]}],
           "plain": "µs ✓"}


# ---- the encoder ---------------------------------------------------------------------
@pytest.mark.parametrize("indent", [None, 2])
def test_json_without_escaped_bytes_is_msgspecs_own(indent):
    plain = _same_but_utf8(PAYLOAD)
    expect = msgspec.json.encode(plain)
    if indent is not None:
        expect = msgspec.json.format(expect, indent=indent)
    assert encode_json(plain, indent=indent) == expect


@pytest.mark.parametrize("indent", [None, 2])
def test_json_keeps_escaped_bytes_exact(indent):
    body = encode_json(PAYLOAD, indent=indent)
    body.decode("utf-8")  # valid UTF-8
    decoded = json.loads(body)
    assert decoded["runs"][0]["run"] == RUN
    assert decoded["runs"][0][f"key {WORKER}"][1] == "caf\udce9\udcff tail"
    assert decoded["runs"][0]["x"] is None and decoded["runs"][0]["inf"] is None  # as msgspec
    # Everything else is byte for byte what msgspec writes: only the escapes differ.
    plain = encode_json(_same_but_utf8(PAYLOAD), indent=indent)
    for byte in (0xE9, 0xF6, 0xFF):
        body = body.replace(f"\\udc{byte:02x}".encode(), chr(byte).encode())
    assert body == plain


def test_a_payload_holding_the_placeholder_draws_another(monkeypatch):
    drawn = iter(["0" * 32, "1" * 32])
    monkeypatch.setattr(output, "_nonce", lambda: next(drawn))
    payload = {"a": RUN, "b": "0" * 32 + "-0"}
    assert json.loads(encode_json(payload)) == payload


def test_cli_json_text():
    assert json_text({"run": RUN}) == '{\n  "run": "caf\\udce9"\n}\n'


def test_displayable():
    assert displayable("run caf\udce9/w\udcf6rker") == "run caf\ufffd/w\ufffdrker"
    same = "µs ✓ 😀"
    assert displayable(same) is same


# ---- the tab -------------------------------------------------------------------------
def test_query_args_keep_bytes_that_are_not_utf8():
    def args(query: bytes) -> dict[str, str]:
        # WSGI hands the raw query over as a str of its bytes, decoded as Latin-1.
        environ = EnvironBuilder().get_environ()
        environ["QUERY_STRING"] = query.decode("latin-1")
        return query_args(Request(environ))

    assert args(b"run=caf%E9&span=&w=a+b%2Bc&w=second") == {"run": RUN, "span": "",
                                                             "w": "a b+c"}
    assert args("run=caf\xe9".encode("latin-1")) == {"run": RUN}  # sent unescaped
    assert args(b"run=caf%C3%A9") == {"run": "café"}


def test_runs_lists_a_latin1_run_exactly(latin1_logdir):
    r = tb_app(["--logdir", str(latin1_logdir)]).get(f"{BASE}/runs")
    assert r.status_code == 200, r.data[:300]
    assert b'"run":"caf\\udce9"' in r.data
    runs = json.loads(r.data)["runs"]
    assert [r["run"] for r in runs] == [RUN]
    assert runs[0]["workers"][0]["worker"] == WORKER
    assert runs[0]["workers"][0]["spans"][0]["file"] == FILE


def test_a_latin1_run_is_found_and_analysed_by_its_bytes(latin1_logdir):
    client = tb_app(["--logdir", str(latin1_logdir)])
    query = "run=caf%E9&worker=w%F6rker0&span=1"
    r = get_ready(client, f"{BASE}/span?{query}")
    assert r.status_code == 200, r.data[:300]
    body = json.loads(r.data)
    assert body["status"] == "ready", body
    assert [s["step"] for s in body["summary"]["steps"]] == [1, 2, 3]
    r = get_ready(client, f"{BASE}/step?{query}&step=2")
    assert r.status_code == 200 and json.loads(r.data)["status"] == "ready", r.data[:300]
    r = get_ready(client, f"{BASE}/run?run=caf%E9")
    assert r.status_code == 200 and json.loads(r.data)["run"] == RUN


# ---- the CLI and the API -------------------------------------------------------------
def test_report_json_keeps_the_name_exact(latin1_logdir, capsys):
    assert main(["report", str(latin1_logdir), "--format", "json", "--no-cache"]) == 0
    doc = json.loads(capsys.readouterr().out)
    span = doc["runs"][0]["workers"][0]["spans"][0]
    assert (doc["runs"][0]["run"], span["file"]) == (RUN, FILE)
    assert len(span["steps"]) == 3


def test_the_cache_keys_and_serves_the_file(latin1_logdir, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("TB_DIAGNOSTICS_CACHE", str(tmp_path / "cache"))
    outs = []
    for _ in range(2):  # the second run reads the cache the first wrote
        assert main(["report", str(latin1_logdir), "--format", "json"]) == 0
        outs.append(json.loads(capsys.readouterr().out))
    assert outs[0] == outs[1]
    assert outs[0]["runs"][0]["run"] == RUN
    assert any((tmp_path / "cache").rglob("*")), "nothing was cached"


def _written(tmp_path: Path, argv: list[str]) -> str:
    out = tmp_path / "out"
    assert main([*argv, "--no-cache", "-o", str(out)]) == 0
    return out.read_bytes().decode("utf-8")  # strict: the file is valid UTF-8


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_report_text_and_markdown_show_replacement_characters(latin1_logdir, tmp_path, fmt):
    text = _written(tmp_path, ["report", str(latin1_logdir), "--format", fmt])
    assert SHOWN_RUN in text and "w\ufffdrker0" in text


@pytest.mark.parametrize("fmt", ["html", "markdown"])
def test_export_shows_replacement_characters(latin1_logdir, tmp_path, fmt):
    text = _written(tmp_path, ["export", str(latin1_logdir), "--format", fmt])
    assert SHOWN_RUN in text


@pytest.fixture
def two_latin1_runs(latin1_logdir: Path) -> Path:
    """The Latin-1 run and a copy of it, ``na\\xefve``, to compare."""
    src = os.fsencode(latin1_logdir) + b"/caf\xe9"
    dst = os.fsencode(latin1_logdir) + b"/na\xefve"
    os.makedirs(dst)
    for name in os.listdir(src):
        with open(src + b"/" + name, "rb") as a, open(dst + b"/" + name, "wb") as b:
            b.write(a.read())
    return latin1_logdir


def test_compare_and_check_keep_names_exact(two_latin1_runs, tmp_path):
    sides = [str(two_latin1_runs), "--baseline", RUN, "--candidate", "na\udcefve"]
    doc = json.loads(_written(tmp_path, ["compare", *sides, "--format", "json"]))
    assert doc["baseline"]["run"] == RUN
    text = _written(tmp_path, ["compare", *sides, "--format", "markdown"])
    assert SHOWN_RUN in text and "na\ufffdve" in text
    doc = json.loads(_written(tmp_path, ["check", *sides, "--format", "json"]))
    assert doc["report"]["runs"][0]["run"] == "na\udcefve"


def test_api_views_show_replacement_characters(latin1_logdir):
    import tb_diagnostics

    report = tb_diagnostics.analyze(str(latin1_logdir), cache=False)
    assert report.document["runs"][0]["run"] == RUN
    for text in (report.to_markdown(), report.to_text(), report._repr_html_()):
        text.encode("utf-8")
        assert SHOWN_RUN in text
