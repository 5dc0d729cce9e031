"""The bytes of a cached model and of a cached results file (the cache's file formats).

A model is one file, written in one pass and read with one ``readinto``::

    tb-diagnostics-model <format> <header bytes> <crc32 of everything after this line>\\n
    <header: JSON of the strings, lanes, metadata and each column's dtype, shape, offset>
    <zero padding to a multiple of 64 bytes, counted from the start of the file>
    <the columns' raw bytes, each at a 64-byte aligned offset>

The columns come back as views of that one buffer (no copy, writable, aligned), so a
warm load costs about a read of the file. It replaces an ``.npz`` plus a ``.json``:
``numpy.savez`` wrote a zip member per column (about 3 ms for a small trace, more
than a quarter of analysing it), and two files are two creates. The CRC stands for
the zip members' CRCs: damaged bytes are a miss, never a model. Only plain numeric
columns are stored (no pickles, no objects).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from dataclasses import fields
from typing import Any

import numpy as np

from tb_diagnostics.output import decode_json, encode_json
from tb_diagnostics.trace.model import Lane, MemoryEvents, TraceMeta, TraceModel
from tb_diagnostics.trace.string_table import StringTable, string_list

MODEL_MAGIC = b"tb-diagnostics-model"
_ALIGN = 64
#: Booleans, integers, unsigned integers and floats: nothing that needs a pickle.
_NUMERIC_KINDS = frozenset("biuf")
_ARRAY_FIELDS = [f.name for f in fields(TraceModel)
                 if f.name not in ("path", "strings", "lanes", "memory", "meta", "origin_us",
                                   "warnings")]
_MEMORY_FIELDS = [f.name for f in fields(MemoryEvents)]


def _padding(offset: int) -> bytes:
    return b"\0" * (-offset % _ALIGN)


def model_parts(model: TraceModel, fmt: int) -> list[Any] | None:
    """The model file as a list of byte buffers to write in order (the columns are not
    copied), or None when a column is not plain numbers (such a model is not cached)."""
    arrays = {k: getattr(model, k) for k in _ARRAY_FIELDS}
    arrays.update({f"memory.{k}": getattr(model.memory, k) for k in _MEMORY_FIELDS})
    if any(not isinstance(a, np.ndarray) or a.dtype.kind not in _NUMERIC_KINDS
           for a in arrays.values()):
        return None
    # Columns the trace never fills are one value viewed n times: kept so.
    constant = {k: int(a.shape[0]) for k, a in arrays.items()
                if a.ndim == 1 and a.shape[0] and a.strides == (0,)}
    columns: list[tuple[str, np.ndarray]] = []
    specs = []
    offset = 0
    for k, a in arrays.items():
        a = np.ascontiguousarray(a[:1] if k in constant else a)
        offset += -offset % _ALIGN
        specs.append([k, a.dtype.str, list(a.shape), offset])
        columns.append((k, a))
        offset += a.nbytes
    header = encode_json({
        "format": fmt,
        "rows": len(model),
        "strings": string_list(model.strings),
        "lanes": [{"pid": ln.pid, "tid": ln.tid, "is_device": ln.is_device,
                   "label": ln.label} for ln in model.lanes],
        "meta": {k.name: getattr(model.meta, k.name) for k in fields(TraceMeta)},
        "origin_us": model.origin_us,
        "warnings": model.warnings,
        "constant": constant,
        "columns": specs,
    })
    data: list[Any] = []
    pos = 0
    for (_, a), (_, _, _, off) in zip(columns, specs, strict=True):
        data.append(b"\0" * (off - pos))
        data.append(memoryview(a).cast("B") if a.nbytes else b"")
        pos = off + a.nbytes
    # The first line's length is fixed by the header's (the CRC is 8 hex digits), and
    # the columns start at the next multiple of 64 after the header.
    line_len = len(_first_line(fmt, len(header), 0))
    rest = [header, _padding(line_len + len(header)), *data]
    return [_first_line(fmt, len(header), _crc(rest)), *rest]


def _first_line(fmt: int, header_len: int, crc: int) -> bytes:
    return b"%s %d %d %08x\n" % (MODEL_MAGIC, fmt, header_len, crc)


def _crc(parts: Iterable[Any]) -> int:
    crc = 0
    for p in parts:
        crc = zlib.crc32(p, crc)
    return crc


def model_from_buffer(raw: bytearray, fmt: int, path: str) -> TraceModel | None:
    """The model in ``raw`` (a whole model file), or None when it is not exactly what
    :func:`model_parts` wrote: another format, a bad CRC, an edited or partial header."""
    end = raw.find(b"\n", 0, 128)
    if end < 0:
        return None
    magic, version, head_len, crc = bytes(raw[:end]).split(b" ")
    if magic != MODEL_MAGIC or int(version) != fmt:
        return None
    view = memoryview(raw)
    if zlib.crc32(view[end + 1:]) != int(crc, 16):
        return None
    start = end + 1 + int(head_len)
    meta = decode_json(bytes(view[end + 1:start]))
    if not isinstance(meta, dict) or meta.get("format") != fmt:
        return None
    base = start + len(_padding(start))
    arrays = {}
    for name, dtype, shape, offset in meta["columns"]:
        dt = np.dtype(dtype)
        if dt.kind not in _NUMERIC_KINDS:
            return None
        count = int(np.prod(shape)) if shape else 1
        arrays[name] = np.frombuffer(raw, dtype=dt, count=count,
                                     offset=base + offset).reshape(shape)
    for k, n in meta["constant"].items():  # stored as their one value
        arrays[k] = np.broadcast_to(arrays[k], (n,))
    if any(f"memory.{k}" not in arrays for k in _MEMORY_FIELDS) or any(
            k not in arrays for k in _ARRAY_FIELDS):
        return None  # written before a column was added: a miss, not a model
    n_rows = meta["rows"]
    if any(arrays[k].ndim != 1 or arrays[k].shape[0] != n_rows for k in _ARRAY_FIELDS):
        return None
    strings = meta["strings"]
    if not isinstance(strings, list) or not all(isinstance(x, str) for x in strings):
        return None
    return TraceModel(
        path=path,
        strings=StringTable(strings),  # as the loader holds them: one text
        lanes=[Lane(**ln) for ln in meta["lanes"]],
        memory=MemoryEvents(**{k: arrays[f"memory.{k}"] for k in _MEMORY_FIELDS}),
        meta=TraceMeta(**meta["meta"]),
        origin_us=float(meta["origin_us"]),
        warnings=[str(w) for w in meta["warnings"]],
        **{k: arrays[k] for k in _ARRAY_FIELDS},
    )
