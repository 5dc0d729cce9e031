"""The shipped device peaks table: its keys, its validation and its loading.

``tb_diagnostics/data/device_peaks.json`` holds one row per part: the dense (no structured
sparsity) vendor figures for every precision in :data:`PRECISIONS` plus the memory
bandwidth, the patterns that pick the row from a trace's device name, the part's compute
capability, SM count and memory size where known (identification by properties reads
them, :mod:`.identify`), and the page every figure came from. ``docs/peaks.md`` says what
each column means. This module checks a table's shape (every row cited and complete, every
value a positive number or null, no pattern or architecture claimed twice) and compiles it
once per process; :mod:`.peaks` matches names against it and applies overrides.

Split from peaks.py, which re-exports the public names (``PRECISIONS``, ``PEAK_KEYS``,
``PeaksFileError``, ``table``), so ``from ...cost.peaks import PRECISIONS`` keeps working.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

#: The precisions a row gives peaks for, widest float first, then the integer unit: TFLOP/s
#: (TOPS for int8). fp6 and fp4 are Blackwell's (and CDNA4's) block-scaled formats; they
#: sit after fp8 so that the floats read in order of falling width (and rising rate).
PRECISIONS: tuple[str, ...] = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp6", "fp4",
                               "int8")
#: Every key of a peaks mapping: the precisions, then the memory bandwidth in GB/s.
PEAK_KEYS: tuple[str, ...] = (*PRECISIONS, "hbm_gbps")

_ROW_KEYS = frozenset({"name", "match", "peaks", "source", "notes", "gcn_arch", "cc", "sms",
                       "memory_gb"})
_CC_FORMAT = re.compile(r"\d+\.\d+")
_TABLE_KEYS = frozenset({"version", "about", "devices"})


class PeaksFileError(ValueError):
    """A peaks table or override file that cannot be used; the message names the file."""


# ---------------------------------------------------------------------------------------
# Shared validation of peak values (table rows and override entries alike).


def check_value(where: str, key: str, value: Any, problems: list[str]) -> float | None:
    """``value`` as a float (None for null); a problem is appended when it is no peak."""
    # bool is an int to Python, and "true" as a peak is surely a slip.
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        problems.append(f"{where}: {key} must be a number or null, not {value!r}")
        return None
    if not math.isfinite(value) or value <= 0:
        # Zero would divide a utilisation by nothing; negative is nonsense.
        problems.append(f"{where}: {key} must be a positive number, not {value!r}")
        return None
    return float(value)


def raise_problems(path: str, problems: list[str]) -> None:
    """Raise one :class:`PeaksFileError` naming ``path`` and the first problems found."""
    if problems:
        shown = "; ".join(problems[:5])
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise PeaksFileError(f"{path}: {shown}{more}")


def read_json(path: str, text: str) -> Any:
    """Parse ``text`` strictly: duplicate keys, NaN and Infinity are errors, not values."""

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        # json keeps the last of two equal keys silently; an override file that says
        # "H100" twice is a mistake worth naming.
        out: dict[str, Any] = {}
        for k, v in items:
            if k in out:
                raise PeaksFileError(f"{path}: key {k!r} appears twice")
            out[k] = v
        return out

    try:
        return json.loads(text, object_pairs_hook=pairs,
                          parse_constant=lambda c: _reject_constant(path, c))
    except json.JSONDecodeError as e:
        raise PeaksFileError(f"{path}: invalid JSON at line {e.lineno} column {e.colno}: "
                             f"{e.msg}") from None


def _reject_constant(path: str, constant: str) -> Any:
    # Python's json accepts NaN and Infinity, which are not JSON and not peaks.
    raise PeaksFileError(f"{path}: {constant} is not a valid peak value")


# ---------------------------------------------------------------------------------------
# The shipped table.


@dataclass(frozen=True)
class Row:
    """A compiled table row: what name matching and identification read."""

    name: str
    patterns: tuple[tuple[str, bool], ...]  # (lower-cased pattern, anchored at the end)
    gcn_arch: tuple[str, ...]
    peaks: dict[str, float | None]
    source: str
    cc: str | None = None  # "9.0": computeMajor.computeMinor, for identify.py
    sms: int | None = None  # numSms of the part, for identify.py
    memory_gb: float | None = None  # nominal memory ("80 GB"), to tell sizes apart


def _table_text() -> tuple[str, str]:
    """The shipped table's text and a path for messages."""
    ref = resources.files("tb_diagnostics").joinpath("data").joinpath("device_peaks.json")
    try:
        return ref.read_text(encoding="utf-8"), str(ref)
    except (FileNotFoundError, NotADirectoryError):
        # A source checkout run without installing still has the file beside the package.
        p = Path(__file__).resolve().parents[2] / "data" / "device_peaks.json"
        try:
            return p.read_text(encoding="utf-8"), str(p)
        except OSError as e:
            raise PeaksFileError(f"{p}: cannot read the device peaks table: "
                                 f"{e.strerror or e}") from None


def validate_table(path: str, data: Any) -> list[dict[str, Any]]:
    """The rows of a parsed table; :class:`PeaksFileError` lists what is wrong with it."""
    if not isinstance(data, dict):
        raise PeaksFileError(f"{path}: the table must be a JSON object")
    problems: list[str] = []
    unknown = set(data) - _TABLE_KEYS
    if unknown:
        problems.append(f"unknown top-level keys {sorted(unknown)}")
    if data.get("version") != 1:
        problems.append(f"version must be 1, not {data.get('version')!r}")
    rows = data.get("devices")
    if not isinstance(rows, list) or not rows:
        raise PeaksFileError(f"{path}: devices must be a non-empty list")
    seen_patterns: dict[str, str] = {}
    seen_arch: dict[str, str] = {}
    for i, row in enumerate(rows):
        where = f"devices[{i}]"
        if not isinstance(row, dict):
            problems.append(f"{where} must be an object")
            continue
        name = row.get("name")
        if isinstance(name, str) and name.strip():
            where = f"devices[{i}] ({name})"
        else:
            problems.append(f"{where}: name must be a non-empty string")
        extra = set(row) - _ROW_KEYS
        if extra:
            problems.append(f"{where}: unknown keys {sorted(extra)}")
        source = row.get("source")
        if not isinstance(source, str) or not source.strip():
            problems.append(f"{where}: source must be a non-empty string")
        if "notes" in row and not isinstance(row["notes"], str):
            problems.append(f"{where}: notes must be a string")
        match = row.get("match")
        if (not isinstance(match, list) or not match
                or not all(isinstance(m, str) and m.strip(" $") for m in match)):
            problems.append(f"{where}: match must be a non-empty list of non-empty strings")
        else:
            for m in match:
                key = m.lower()
                # Two rows claiming one pattern would make the winner depend on row order.
                if key in seen_patterns and seen_patterns[key] != where:
                    problems.append(f"{where}: pattern {m!r} is also on {seen_patterns[key]}")
                seen_patterns[key] = where
        arch = row.get("gcn_arch", [])
        if not isinstance(arch, list) or not all(isinstance(a, str) and a for a in arch):
            problems.append(f"{where}: gcn_arch must be a list of strings")
        else:
            for a in arch:
                key = a.lower()
                # The fallback is only for an architecture one row can answer for.
                if key in seen_arch:
                    problems.append(f"{where}: gcn_arch {a!r} is also on {seen_arch[key]}")
                seen_arch[key] = where
        cc = row.get("cc")
        if cc is not None and not (isinstance(cc, str) and _CC_FORMAT.fullmatch(cc)):
            problems.append(f"{where}: cc must be a compute capability like \"9.0\"")
        sms = row.get("sms")
        if sms is not None and (isinstance(sms, bool) or not isinstance(sms, int) or sms <= 0):
            problems.append(f"{where}: sms must be a positive integer")
        memory = row.get("memory_gb")
        if memory is not None and (isinstance(memory, bool)
                                   or not isinstance(memory, (int, float))
                                   or not math.isfinite(memory) or memory <= 0):
            problems.append(f"{where}: memory_gb must be a positive number")
        peaks = row.get("peaks")
        if not isinstance(peaks, dict):
            problems.append(f"{where}: peaks must be an object")
            continue
        missing = [k for k in PEAK_KEYS if k not in peaks]
        if missing:
            problems.append(f"{where}: peaks lacks {missing} (write null for none)")
        for k, v in peaks.items():
            if k not in PEAK_KEYS:
                problems.append(f"{where}: unknown peak key {k!r}")
            else:
                check_value(where, k, v, problems)
    raise_problems(path, problems)
    return rows


@functools.lru_cache(maxsize=1)
def load_table() -> tuple[tuple[dict[str, Any], ...], tuple[Row, ...]]:
    """The shipped table's rows as written and compiled; read and checked once."""
    text, path = _table_text()
    rows = validate_table(path, read_json(path, text))
    compiled = tuple(
        Row(name=r["name"],
            patterns=tuple((m.rstrip("$").lower(), m.endswith("$")) for m in r["match"]),
            gcn_arch=tuple(a.lower() for a in r.get("gcn_arch", [])),
            peaks={k: (None if r["peaks"][k] is None else float(r["peaks"][k]))
                   for k in PEAK_KEYS},
            source=r["source"], cc=r.get("cc"), sms=r.get("sms"),
            memory_gb=(None if r.get("memory_gb") is None else float(r["memory_gb"])))
        for r in rows)
    return tuple(rows), compiled


def table() -> list[dict[str, Any]]:
    """The rows of the shipped table, validated (a fresh copy: callers may mutate it)."""
    return copy.deepcopy(list(load_table()[0]))

