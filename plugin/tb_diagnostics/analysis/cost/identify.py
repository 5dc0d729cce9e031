"""Which peaks row a device gets when its name alone does not say: identification by the
``deviceProperties`` a trace records (compute capability, ``numSms``).

Names are not enough: CUDA reports a 96 GB H100 SXM board as plain ``"NVIDIA H100"``,
and new or regional parts (a new workstation card, a laptop part) reach users before any table
row. The properties PyTorch writes into every Kineto trace pin much of it down:

1. **By properties.** The rows whose names contain every word of the device's name
   (vendor words aside: ``"NVIDIA H100"`` -> ``h100``; Jetson's ``"Orin"`` -> ``orin``) and
   whose compute capability and SM count equal the device's are candidates; a name with a
   word no row has (``SFF``, ``Laptop``, ``D``) is a variant the table lacks. Where a row
   gives its nominal memory, the device's ``totalGlobalMem`` must be 80-102 % of it
   (drivers reserve some, ECC on GDDR about 6 %). One candidate, or several with equal
   peaks, is the answer (``identified_by="properties"``). A plain ``"NVIDIA H100"`` with
   132 SMs at cc 9.0 is SXM-class; the 114-SM part is the PCIe one; an ``"Orin"`` with 8
   SMs and 14 GiB is the Orin NX 16GB module.
2. **Estimate.** An NVIDIA part of a known architecture that no row answers for gets the
   peaks of that architecture's reference part (:data:`ESTIMATE_REFERENCES`) scaled by
   SM count: per-SM rates times SMs, at the reference part's boost clock. GeForce names
   take the GeForce reference (half-rate FP32-accumulate Tensor Cores), others the
   data-centre/workstation one. Memory bandwidth depends on the memory bus, which the
   properties do not record, so it stays unknown (``identified_by="estimate"``).
3. **Nothing to go on.** No row, no compute capability or SM count, properties that fit
   rows with different peaks, or an architecture without a reference: no peaks, and
   :func:`why_no_peaks` says which.

HIP reports ``computeMajor`` 9 for gfx90a (MI250), so neither rule 1 nor rule 2 applies
to names that are not NVIDIA's: AMD parts go by name or ``gcnArchName`` (peaks.py).
This module reads compiled table rows passed in (or, for :func:`why_no_peaks`, the
shipped table from :mod:`.peaks_table`); it imports nothing from peaks.py, so peaks.py
can call it without a cycle.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol


class PeaksRow(Protocol):
    """What identification reads of a compiled table row (peaks._Row)."""

    name: str
    peaks: dict[str, float | None]
    source: str
    cc: str | None
    sms: int | None
    memory_gb: float | None


@dataclass(frozen=True)
class EstimateReference:
    """The part whose per-SM rates stand for its architecture, at its boost clock."""

    row: str  # the table row's name; its cc and sms keys give the divisor
    clock_ghz: float  # the clock its (and so the estimate's) figures assume
    architecture: str


#: (compute capability, GeForce name?) -> reference part. Each row's own source gives its
#: figures; the clocks are those sources' boost clocks (Volta 1.53, Turing T4 1.59 and
#: 2080 Ti 1.545, GA100 1.41, GA10x 1.695, AD102 2.55 RTX 5000 Ada / 2.52 RTX 4090, GH100
#: 1.83 for Tensor Core figures). Ada's non-GeForce reference is the RTX 5000 Ada, not the
#: L40: the L40 is the one non-GeForce Ada part whose Tensor Cores run FP32 accumulate at
#: half rate (181.05 at 142 SMs x 2.49 GHz, 512 FLOP per SM per clock), while the
#: workstation parts, the L4 and the L40S run it at the full 1024 (RTX 5000 Ada: 261.12 =
#: 100 x 2.55 x 1024; L4: 121 = 58 x 2.04 x 1024). Scaling the L40 halved every other part;
#: the full rate keeps the estimate the upper bound it is meant to be.
ESTIMATE_REFERENCES: dict[tuple[str, bool], EstimateReference] = {
    ("7.0", False): EstimateReference("NVIDIA Tesla V100 SXM2", 1.53, "Volta GV100"),
    ("7.5", False): EstimateReference("NVIDIA Tesla T4", 1.59, "Turing TU10x"),
    ("7.5", True): EstimateReference("NVIDIA GeForce RTX 2080 Ti", 1.545, "Turing TU10x"),
    ("8.0", False): EstimateReference("NVIDIA A100 SXM4 40GB", 1.41, "Ampere GA100"),
    ("8.6", False): EstimateReference("NVIDIA A10", 1.695, "Ampere GA10x"),
    ("8.6", True): EstimateReference("NVIDIA GeForce RTX 3090", 1.695, "Ampere GA10x"),
    ("8.9", False): EstimateReference("NVIDIA RTX 5000 Ada Generation", 2.55, "Ada AD10x"),
    ("8.9", True): EstimateReference("NVIDIA GeForce RTX 4090", 2.52, "Ada AD10x"),
    ("9.0", False): EstimateReference("NVIDIA H100 SXM5 80GB", 1.83, "Hopper GH100"),
}

# Jetson modules report plain "Orin": NVIDIA's, though the name does not say so.
_NVIDIA_NAME = re.compile(r"\b(nvidia|tesla|quadro|geforce|jetson|orin)\b", re.IGNORECASE)
_WORD = re.compile(r"[a-z0-9]+")
#: Words that name the vendor or the product line, not the part: they tell no rows apart.
_VENDOR_WORDS = frozenset({"nvidia", "tesla", "quadro", "geforce"})
#: A device's totalGlobalMem against a row's nominal memory: drivers reserve a little,
#: ECC on GDDR takes about 1/16, a Jetson's OS shares the module's memory (A6000 with ECC:
#: 44.5 of 48 GiB; Orin NX 16GB: 14.1 GiB); more than nominal is another part.
_MEMORY_FRACTION = (0.8, 1.02)


@dataclass(frozen=True)
class Identified:
    """The row (or estimate) a device was identified as, and the sentence saying how."""

    name: str
    peaks: dict[str, float | None]
    source: str
    identified_by: str  # "properties" | "estimate"
    identification: str


def compute_capability(properties: Mapping[str, Any] | None) -> str | None:
    """``"9.0"`` from ``computeMajor``/``computeMinor``; None when either is missing."""
    if not properties:
        return None
    major, minor = properties.get("computeMajor"), properties.get("computeMinor")
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
               for v in (major, minor)):
        return None
    return f"{major}.{minor}"


def _sm_count(properties: Mapping[str, Any] | None) -> int | None:
    n = properties.get("numSms") if properties else None
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None


def _name_words(text: str) -> set[str]:
    # "NVIDIA H100 SXM5 80GB" -> {h100, sxm5, 80gb}: "nvidia" tells no two rows apart.
    return set(_WORD.findall(text.lower())) - _VENDOR_WORDS


def _memory_gib(properties: Mapping[str, Any] | None) -> float | None:
    n = properties.get("totalGlobalMem") if properties else None
    ok = isinstance(n, (int, float)) and not isinstance(n, bool) and n > 0
    return n / 2**30 if ok else None


def _memory_fits(row: PeaksRow, gib: float | None) -> bool:
    """Whether a device with ``gib`` GiB can be the row's part (unknown either way: yes)."""
    if gib is None or row.memory_gb is None:
        return True
    low, high = _MEMORY_FRACTION
    return low * row.memory_gb <= gib <= high * row.memory_gb


def candidates(device_name: str, properties: Mapping[str, Any] | None,
               rows: Iterable[PeaksRow]) -> list[PeaksRow]:
    """The rows a device's name words, compute capability, SM count and memory fit."""
    cc, sms = compute_capability(properties), _sm_count(properties)
    words = _name_words(device_name)
    if cc is None or sms is None or not words:
        return []
    gib = _memory_gib(properties)
    return [r for r in rows
            if r.cc == cc and r.sms == sms and words <= _name_words(r.name)
            and _memory_fits(r, gib)]


def _geforce(name: str) -> bool:
    return "geforce" in name.lower()


def identify(device_name: str, properties: Mapping[str, Any] | None,
             rows: Sequence[PeaksRow]) -> Identified | None:
    """The peaks of a device whose name matched no row, from its properties; None when
    there is nothing to go on (see :func:`why_no_peaks`)."""
    if not _NVIDIA_NAME.search(device_name):
        return None
    cc, sms = compute_capability(properties), _sm_count(properties)
    if cc is None or sms is None:
        return None
    found = candidates(device_name, properties, rows)
    if found:
        # Rows fit: their figures or nothing. Where they disagree, an estimate would be a
        # guess between known parts, so there are no peaks (why_no_peaks names them).
        return _by_properties(device_name, cc, sms, properties, found)
    return _estimate(device_name, cc, sms, rows)


def _ambiguous(found: Sequence[PeaksRow]) -> bool:
    return any(r.peaks != found[0].peaks for r in found[1:])


def _by_properties(device_name: str, cc: str, sms: int,
                   properties: Mapping[str, Any] | None,
                   found: Sequence[PeaksRow]) -> Identified | None:
    if _ambiguous(found):
        return None
    row = found[0]
    gib = _memory_gib(properties)
    fits = f"compute capability {cc} and {sms} SMs"
    if gib is not None and row.memory_gb is not None:
        fits = f"compute capability {cc}, {sms} SMs and {gib:.1f} GiB of memory"
    why = (f"identified by its properties: '{device_name}' matches no row by name; "
           f"{fits} are those of the {row.name}")
    return Identified(name=row.name, peaks=dict(row.peaks), source=row.source,
                      identified_by="properties", identification=why)


def _estimate(device_name: str, cc: str, sms: int,
              rows: Sequence[PeaksRow]) -> Identified | None:
    geforce = _geforce(device_name)
    ref = ESTIMATE_REFERENCES.get((cc, geforce)) or ESTIMATE_REFERENCES.get((cc, not geforce))
    if ref is None:
        return None
    row = next((r for r in rows if r.name == ref.row), None)
    if row is None or not row.sms:
        return None
    scale = sms / row.sms
    peaks: dict[str, float | None] = {
        k: (None if v is None or k == "hbm_gbps" else round(v * scale, 3))
        for k, v in row.peaks.items()}
    why = (f"estimated: '{device_name}' matches no row; {sms} SMs × the per-SM rates of "
           f"{ref.architecture} ({row.name}, {row.sms} SMs) at its {ref.clock_ghz} GHz "
           f"boost clock; memory bandwidth unknown (the properties do not give the bus)")
    # The trace's own name: "estimated" travels in identified_by, where the tab shows it.
    return Identified(name=device_name, peaks=peaks,
                      source=f"estimated from {row.name}: {row.source}",
                      identified_by="estimate", identification=why)


def why_no_peaks(device_name: str | None, properties: Mapping[str, Any] | None,
                 rows: Sequence[PeaksRow] | None = None) -> str:
    """Why a device got no peaks: the sentence a report shows in their place. ``rows``
    are the compiled table rows (default: the shipped table's)."""
    if device_name is None:
        return "a CPU-only trace: no device peaks (give them with --peaks, key \"cpu\")"
    base = f"'{device_name}' matches no row of the peaks table"
    if not _NVIDIA_NAME.search(device_name):
        return f"{base}, and only NVIDIA parts are identified by their properties"
    cc, sms = compute_capability(properties), _sm_count(properties)
    if cc is None or sms is None:
        return f"{base}, and the trace records no compute capability or SM count"
    if rows is None:
        from tb_diagnostics.analysis.cost.peaks_table import load_table
        rows = load_table()[1]
    found = candidates(device_name, properties, rows)
    if _ambiguous(found):
        names = ", ".join(r.name for r in found)
        return (f"{base}, and its properties (compute capability {cc}, {sms} SMs) fit "
                f"parts with different peaks: {names}")
    return (f"{base}, and compute capability {cc} has no reference part to estimate "
            f"its peaks from")
