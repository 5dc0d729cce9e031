"""Device peak throughputs: the shipped table, its lookup by device name, and overrides.

A roofline or an "achieved vs peak" figure needs the device's peak FLOP/s per precision
and its memory bandwidth. The table (``tb_diagnostics/data/device_peaks.json``) holds
dense (no structured sparsity) vendor figures, one row per part, each with the page it
was taken from; ``docs/peaks.md`` says what every column means. The table's keys, its
validation and its loading live in :mod:`.peaks_table`; the names this module has always
offered (``PRECISIONS``, ``PEAK_KEYS``, ``PeaksFileError``, ``table``) are re-exported.

A trace names its device in ``deviceProperties[].name`` (``"NVIDIA H100 80GB HBM3"``).
:func:`lookup` picks the row whose ``match`` pattern is the longest one found in that
name, so ``"A100-SXM4-80GB"`` beats ``"A100"`` and the A10 row cannot take an A100.
Table patterns match whole words (the characters next to the match are not letters or
digits) and a trailing ``$`` pins a pattern to the end of the name: without that,
``"RTX 4090"`` would also select the 4090 laptop part at half its figures. An AMD name
that says nothing (``"AMD Radeon Graphics"``) falls back to the row listing the device's
``gcnArchName``, where one part dominates that architecture.

Overrides come from a JSON file (path in ``TB_DIAGNOSTICS_PEAKS``) keyed by a
case-insensitive substring of the device name, plus ``"cpu"`` for CPU-only traces and
``"*"`` for any device nothing more specific matches; an entry updates the row key by
key and says so in the result's ``source``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tb_diagnostics.analysis.cost.identify import Identified, identify
from tb_diagnostics.analysis.cost.peaks_table import (
    PEAK_KEYS,
    PRECISIONS,
    PeaksFileError,
    Row,
    check_value,
    load_table,
    raise_problems,
    read_json,
    table,
    validate_table,
)

__all__ = ["ANY_KEY", "CPU_KEY", "PEAKS_ENV", "PEAK_KEYS", "PRECISIONS", "DevicePeaks",
           "Overrides", "PeaksFileError", "load_overrides", "lookup", "overrides_from_env",
           "overrides_version", "table"]

# The table's validator under its old name, which tests and callers reach for.
_validate_table = validate_table

PEAKS_ENV = "TB_DIAGNOSTICS_PEAKS"  # path of a JSON file of overrides, read by the tab

#: Override keys with a meaning of their own rather than a substring of a device name.
CPU_KEY = "cpu"
ANY_KEY = "*"

_ENTRY_KEYS = frozenset({*PEAK_KEYS, "name"})


@dataclass(frozen=True)
class DevicePeaks:
    """The peaks of one device, and where they came from."""

    name: str | None  # the table's canonical name, or the override's name
    peaks: dict[str, float | None]  # every key of PEAK_KEYS, None when unknown
    source: str | None  # the row's source, "override: <path>", or both joined by "; "
    #: How the row was chosen: "name" (the table's patterns), "properties" (compute
    #: capability and SM count of an ambiguous or unknown name), "estimate" (SM count
    #: times the architecture's per-SM rates), "override" (the override file alone).
    identified_by: str = "name"
    identification: str | None = None  # the sentence saying so, None when by name

    def peak(self, precision: str | None) -> float | None:
        """Peak TFLOP/s (TOPS for int8) of ``precision``; None when the table has none.

        None in gives None out, so an op whose precision the cost model could not tell
        needs no special case at the call site.
        """
        if precision is None:
            return None
        if precision not in PEAK_KEYS:
            # A typo here would otherwise read as "no peak known" and hide the bug.
            raise KeyError(f"unknown precision {precision!r}; expected one of {PEAK_KEYS}")
        return self.peaks.get(precision)

    @property
    def bandwidth_gbps(self) -> float | None:
        """Peak device-memory bandwidth in GB/s."""
        return self.peaks.get("hbm_gbps")

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape the report and the tab read (keys are only ever added)."""
        return {"name": self.name,
                "peaks": {k: self.peaks.get(k) for k in PEAK_KEYS},
                "source": self.source,
                "identified_by": self.identified_by,
                "identification": self.identification}


# ---------------------------------------------------------------------------------------
# Name matching.


def _normalise(name: str) -> str:
    # Drivers have been seen to pad names; one space between words is what patterns expect.
    return " ".join(name.split()).lower()


def _matches(pattern: str, anchored: bool, name: str) -> bool:
    """Whether ``pattern`` occurs in ``name`` as whole words (both lower-cased)."""
    start = name.find(pattern)
    while start != -1:
        end = start + len(pattern)
        before = start == 0 or not (pattern[0].isalnum() and name[start - 1].isalnum())
        if anchored:
            after = end == len(name)
        else:
            after = end == len(name) or not (pattern[-1].isalnum() and name[end].isalnum())
        if before and after:
            return True
        start = name.find(pattern, start + 1)
    return False


def _row_for_name(device_name: str) -> Row | None:
    name = _normalise(device_name)
    best: tuple[int, Row] | None = None
    for row in load_table()[1]:
        for pattern, anchored in row.patterns:
            # Strictly longer wins, so on a tie the earlier row keeps it (table order).
            if _matches(pattern, anchored, name) and (best is None or len(pattern) > best[0]):
                best = (len(pattern), row)
    return best[1] if best else None


def _row_for_arch(properties: Mapping[str, Any] | None) -> tuple[Row, str] | None:
    if not properties:
        return None
    arch = properties.get("gcnArchName")
    if not isinstance(arch, str) or not arch.strip():
        return None
    # "gfx942:sramecc+:xnack-": the feature flags after the colon do not change the part.
    base = arch.split(":", 1)[0].strip().lower()
    for row in load_table()[1]:
        if base in row.gcn_arch:
            return row, base
    return None


# ---------------------------------------------------------------------------------------
# Overrides.


@dataclass(frozen=True)
class Overrides:
    """A parsed override file: entries keyed by device-name substring, ``cpu`` or ``*``."""

    path: str
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)

    def entry_for(self, device_name: str | None) -> dict[str, Any] | None:
        """The entry that applies to ``device_name`` (None: a CPU-only trace), if any.

        The longest key found in the name wins; ``*`` only when no key is found. A
        CPU-only trace takes ``cpu`` alone: a ``*`` written with accelerators in mind
        would give a CPU peaks a thousand times too high.
        """
        if device_name is None:
            return self.entries.get(CPU_KEY)
        name = _normalise(device_name)
        best: tuple[int, dict[str, Any]] | None = None
        for key, entry in self.entries.items():
            if key in (CPU_KEY, ANY_KEY):
                continue
            needle = _normalise(key)
            if needle and needle in name and (best is None or len(needle) > best[0]):
                best = (len(needle), entry)
        if best is not None:
            return best[1]
        return self.entries.get(ANY_KEY)


def load_overrides(path: str | os.PathLike[str]) -> Overrides:
    """Parse an override file; :class:`PeaksFileError` names the file and the problem."""
    shown = os.fspath(path)
    try:
        text = Path(shown).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PeaksFileError(f"{shown}: peaks override file not found") from None
    except (OSError, UnicodeDecodeError) as e:
        reason = getattr(e, "strerror", None) or str(e)
        raise PeaksFileError(f"{shown}: cannot read peaks override file: {reason}") from None
    data = read_json(shown, text)
    if not isinstance(data, dict):
        raise PeaksFileError(f"{shown}: must be a JSON object of device entries")
    # The "devices" wrapper mirrors the table; the bare mapping is accepted for brevity.
    devices = data.get("devices", data)
    if "devices" in data and set(data) - {"devices", "version"}:
        raise PeaksFileError(f"{shown}: unknown top-level keys "
                             f"{sorted(set(data) - {'devices', 'version'})}")
    if not isinstance(devices, dict):
        raise PeaksFileError(f"{shown}: devices must be an object keyed by device name")
    problems: list[str] = []
    entries: dict[str, dict[str, Any]] = {}
    folded: dict[str, str] = {}
    for key, entry in devices.items():
        where = f"devices[{key!r}]"
        if not key.strip():
            problems.append("an empty device key matches every name; use \"*\"")
            continue
        norm = _normalise(key)
        if norm in folded:
            # Matching ignores case, so "H100" and "h100" would fight over the same names.
            problems.append(f"{where}: same key as {folded[norm]!r} (matching ignores case)")
            continue
        folded[norm] = key
        if not isinstance(entry, dict):
            problems.append(f"{where} must be an object of peaks")
            continue
        clean: dict[str, Any] = {}
        for k, v in entry.items():
            if k not in _ENTRY_KEYS:
                problems.append(f"{where}: unknown key {k!r} (expected one of "
                                f"{', '.join(PEAK_KEYS)} or name)")
            elif k == "name":
                if not isinstance(v, str) or not v.strip():
                    problems.append(f"{where}: name must be a non-empty string")
                else:
                    clean[k] = v
            else:
                clean[k] = check_value(where, k, v, problems)
        entries[norm if norm in (CPU_KEY, ANY_KEY) else key] = clean
    raise_problems(shown, problems)
    return Overrides(path=shown, entries=entries)


def overrides_from_env(environ: Mapping[str, str] = os.environ) -> Overrides | None:
    """The overrides named by ``TB_DIAGNOSTICS_PEAKS``; None when unset or empty. Parsed
    once per version of the file (every span of a log dir asks)."""
    value = environ.get(PEAKS_ENV, "").strip()
    if not value:
        return None
    return _load_version(value, *_version(value))


def overrides_version(environ: Mapping[str, str] = os.environ) -> str:
    """What identifies the current overrides, for cache keys: "" when there are none,
    else the file's path, size and modification time."""
    value = environ.get(PEAKS_ENV, "").strip()
    return f"{value}|{_version(value)}" if value else ""


def _version(path: str) -> tuple[int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return (-1, -1)  # load_overrides says what is wrong with it
    return (st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _load_version(path: str, size: int, mtime_ns: int) -> Overrides:
    return load_overrides(path)


# ---------------------------------------------------------------------------------------
# Lookup.


def lookup(device_name: str | None, properties: Mapping[str, Any] | None = None,
           overrides: Overrides | None = None) -> DevicePeaks | None:
    """The peaks of the device a trace names, with any override applied.

    ``device_name`` is ``deviceProperties[].name`` (None for a CPU-only trace);
    ``properties`` is that deviceProperties entry, read for ``gcnArchName`` when the name
    selects no row. None when neither the table nor an override knows the device.
    """
    row: Row | None = None
    arch_note = ""
    found: Identified | None = None
    if device_name is not None:
        row = _row_for_name(device_name)
        if row is None:
            by_arch = _row_for_arch(properties)
            if by_arch is not None:
                row, arch = by_arch
                # Say so: a generic name on a sibling part (MI300A on gfx942) gets these.
                arch_note = f"; matched by gcnArchName {arch}, not by name"
            else:
                found = identify(device_name, properties, load_table()[1])
    entry = overrides.entry_for(device_name) if overrides is not None else None

    if row is None and found is None and not (entry and any(k in PEAK_KEYS for k in entry)):
        return None  # an override with no figures says nothing about an unknown device
    identified_by, identification = "name", None
    if row is not None:
        peaks: dict[str, float | None] = dict(row.peaks)
        source: str | None = row.source + arch_note
        name: str | None = row.name
    elif found is not None:
        peaks, source, name = dict(found.peaks), found.source, found.name
        identified_by, identification = found.identified_by, found.identification
    else:
        peaks, source, name = dict.fromkeys(PEAK_KEYS), None, device_name
        identified_by = "override"
    if entry is not None:
        values = {k: v for k, v in entry.items() if k in PEAK_KEYS}
        changed = [k for k, v in values.items() if peaks.get(k) != v]
        peaks.update(values)
        if "name" in entry:
            name = entry["name"]
        elif name is None:
            name = "CPU"  # only a CPU-only trace reaches here without a name
        if source is None or changed or "name" in entry:
            assert overrides is not None
            mark = f"override: {overrides.path}"
            # Partly overridden: both sources hold some of the figures, so name both.
            whole = source is None or all(k in values for k in PEAK_KEYS)
            source = mark if whole else f"{source}; {mark}"
    return DevicePeaks(name=name, peaks=peaks, source=source, identified_by=identified_by,
                       identification=identification)
