"""A giant string is cut while the trace streams, never held whole (issue: hardening)."""

from __future__ import annotations

import gzip
import json

import msgspec
import pytest

from tb_diagnostics.trace.longstrings import CUT_MARK, StringCap


def _feed(text: bytes, cap: int, block: int) -> tuple[bytes, int]:
    scan, buf = StringCap(cap), bytearray()
    for i in range(0, len(text), block):
        scan.feed(buf, text[i:i + block])
    return bytes(buf), scan.cut


@pytest.mark.parametrize("ascii_only", [True, False])
@pytest.mark.parametrize("block", [1, 2, 3, 7, 64])
@pytest.mark.parametrize("content", [
    "short", "a" * 40, "é" * 30, "\\" * 41, 'q"' * 20, "x\u00e9y" * 9, "\ud83d\ude00" * 9,
    "\t\n" * 25, "\\u0041" * 10, "abc\\\\" * 10,
])
def test_strings_are_cut_at_the_cap_and_stay_valid_json(content, block, ascii_only):
    """Whatever the string holds (escapes, multi-byte characters, surrogate pairs) and
    wherever the blocks fall, the result decodes and keeps a prefix of the string."""
    value = json.loads(json.dumps(content))
    text = json.dumps([{"name": value, "ok": "yes"}, "tail"], ensure_ascii=ascii_only).encode()
    cap = 16
    out, cut = _feed(text, cap, block)
    doc = msgspec.json.decode(out)
    assert doc[0]["ok"] == "yes" and doc[1] == "tail"
    name = doc[0]["name"]
    encoded = json.dumps(value, ensure_ascii=ascii_only).encode()[1:-1]
    if len(encoded) > cap:
        assert cut == 1
        assert name.endswith(CUT_MARK.decode())
        kept = name[: -len(CUT_MARK.decode())]
        # At most one escape (six bytes) and one surrogate half are given up to stay valid.
        assert value.startswith(kept)
        assert len(json.dumps(kept, ensure_ascii=ascii_only).encode()) - 2 >= cap - 12
    else:
        assert cut == 0 and name == value


def test_an_event_with_a_giant_name_loads_with_a_note(tmp_path):
    from tb_diagnostics.trace import load_trace
    from tb_diagnostics.trace.longstrings import STRING_CAP_BYTES

    path = tmp_path / "w.1.pt.trace.json.gz"
    ev = b'{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":%d,"dur":5}'
    with gzip.open(path, "wb", compresslevel=1) as fh:
        fh.write(b'{"traceEvents": [' + ev % 1 + b',{"ph":"X","cat":"cpu_op","pid":1,'
                 b'"tid":1,"ts":3,"dur":1,"name":"')
        for _ in range(64):  # a 64 MiB name, with braces that look like event boundaries
            fh.write(b'x}, {y' * ((1 << 20) // 6))
        fh.write(b'"},' + ev % 10 + b"]}")
    model = load_trace(str(path))
    assert len(model) == 3
    names = sorted((model.name_of(i) for i in range(3)), key=len)
    assert names[:2] == ["aten::mm", "aten::mm"]
    assert STRING_CAP_BYTES - 8 <= len(names[2].encode()) <= STRING_CAP_BYTES + len(CUT_MARK)
    assert any("string longer than 1 MiB cut" in w for w in model.warnings)
