"""The link between host and device: what a ``Memcpy HtoD`` / ``DtoH`` can reach.

A copy between host memory and the device crosses the host link (PCIe, or NVLink-C2C on
Grace parts), which is one to two orders of magnitude slower than device memory. Rating
such a copy against HBM calls a link-bound copy "4 % of roofline"; it is rated here
against the link's theoretical rate per direction instead.

Rates per direction, x16 (PCI-SIG base specifications: 8 / 16 / 32 / 64 GT/s per lane,
128b/130b encoding for 3.0–5.0, FLIT mode for 6.0):

- PCIe 3.0 x16: 8 GT/s × 16 × 128/130 / 8 = 15.75 GB/s;
- PCIe 4.0 x16: 31.5 GB/s; PCIe 5.0 x16: 63.0 GB/s;
- NVLink-C2C (GH200, GB200): 900 GB/s both directions, 450 GB/s each (NVIDIA GH200
  Grace Hopper Superchip datasheet).

Which generation each part uses is its datasheet's "System interface" / "Interconnect"
line (cited per row below). SXM parts are attached to the host CPU by PCIe as well, at
the generation of their family. A link runs at the lower generation of its two ends;
the figure assumes the host matches the device.

Pageable copies stage through a pinned driver buffer: the same link is their ceiling,
but the host-side memcpy into the staging buffer usually keeps them well below it. They
are rated against the same ceiling and flagged ``pageable``.

The device name is ``deviceProperties[].name``, as :mod:`.peaks` reads it; a name no row
matches falls back to its compute capability (``computeMajor``/``computeMinor``), which
fixes the generation of every discrete NVIDIA part of that architecture; an AMD part no row
names gets no link (its reported capability is not an NVIDIA architecture).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: GB/s per direction of an x16 link, by name (PCI-SIG rates; NVIDIA for C2C).
LINK_GBPS: dict[str, float] = {
    "PCIe 3.0 x16": 15.75,
    "PCIe 4.0 x16": 31.5,
    "PCIe 4.0 x8": 15.75,
    "PCIe 5.0 x16": 63.0,
    "PCIe 5.0 x8": 31.5,
    "NVLink-C2C": 450.0,
}

_PCIE_SPEC = "PCI-SIG PCI Express Base Specification 3.0/4.0/5.0 (8/16/32 GT/s, 128b/130b)"

#: (pattern on the device name, link, datasheet saying which link the part has).
#: First match wins: the specific names come before the family names they contain.
_PARTS: tuple[tuple[str, str, str], ...] = (
    (r"GH200|GB200|GB300|Grace", "NVLink-C2C",
     "NVIDIA GH200 Grace Hopper Superchip datasheet: NVLink-C2C 900 GB/s bidirectional"),
    (r"\bA2\b", "PCIe 4.0 x8", "NVIDIA A2 Tensor Core GPU datasheet: PCIe Gen4 x8"),
    (r"RTX 50[56]0\b", "PCIe 5.0 x8", "NVIDIA GeForce RTX 5060 / 5050 specifications: PCIe "
     "Gen5 x8"),
    (r"RTX 40[56]0\b|RTX 40[56]0 Ti|RTX 3050\b", "PCIe 4.0 x8",
     "NVIDIA GeForce RTX 4060 (Ti) / 3050 specifications: PCIe Gen4 x8"),
    (r"H100|H200|H800|H20\b", "PCIe 5.0 x16",
     "NVIDIA H100 / H200 Tensor Core GPU datasheets: PCIe Gen5 128 GB/s (bidirectional)"),
    (r"B100|B200|B300|RTX PRO \d+ Blackwell|RTX 50\d\d", "PCIe 5.0 x16",
     "B100/B200/B300 have a PCIe Gen6 x16 GPU interface, but their hosts are PCIe Gen5 (NVIDIA "
     "DGX B200 User Guide: 2 x Intel Xeon 8570 PCIe Gen5 CPUs), so the link runs at Gen5; "
     "RTX PRO 6000 Blackwell and GeForce RTX 50 datasheets: PCIe Gen5 x16"),
    (r"A100|A800|A10G?\b|A16\b|A30\b|A40\b|L4\b|L20\b|L40S?\b|RTX A\d000|RTX \d000 Ada"
     r"|RTX 30\d\d|RTX 40\d\d", "PCIe 4.0 x16",
     "NVIDIA A100 / A10 / A30 / A40 / L4 / L40 / L40S datasheets: PCIe Gen4 x16 (64 GB/s "
     "bidirectional)"),
    (r"V100|T4\b|P100|P40\b|Quadro RTX|TITAN|RTX 20\d\d|GTX 16\d\d|GTX 10\d\d",
     "PCIe 3.0 x16",
     "NVIDIA V100 / T4 / P100 datasheets: PCIe Gen3 x16 (32 GB/s bidirectional)"),
    (r"MI300X|MI325X|MI355X", "PCIe 5.0 x16",
     "AMD Instinct MI300X / MI325X / MI355X datasheets: PCIe Gen5 x16"),
    (r"MI100|MI210|MI250X?|7900 XTX", "PCIe 4.0 x16",
     "AMD Instinct MI100 / MI210 / MI250 and Radeon RX 7900 XTX specifications: PCIe Gen4 x16"),
)
_COMPILED = tuple((re.compile(p, re.I), link, src) for p, link, src in _PARTS)

#: Integrated parts share one memory with the host: no host link to rate against.
_UNIFIED = re.compile(r"Orin|Xavier|Tegra|MI300A|Thor", re.I)

#: AMD reports a "compute capability" too (gfx90a: 9.0), which says nothing of NVIDIA's
#: architectures; an AMD part is told by its name, its gcnArchName or its 64-wide wavefront.
_AMD_NAME = re.compile(r"\bAMD\b|Radeon|Instinct", re.I)


def _is_amd(device_name: str, properties: Mapping[str, Any]) -> bool:
    return bool(_AMD_NAME.search(device_name) or properties.get("gcnArchName")
                or properties.get("warpSize") == 64)


#: Discrete NVIDIA parts by compute capability: the generation of every board of that
#: architecture (Volta/Turing Gen3, Ampere/Ada Gen4, Hopper/Blackwell Gen5).
_BY_CAPABILITY: dict[tuple[int, int], str] = {
    (7, 0): "PCIe 3.0 x16", (7, 5): "PCIe 3.0 x16",
    (8, 0): "PCIe 4.0 x16", (8, 6): "PCIe 4.0 x16", (8, 9): "PCIe 4.0 x16",
    (9, 0): "PCIe 5.0 x16", (10, 0): "PCIe 5.0 x16", (12, 0): "PCIe 5.0 x16",
}


@dataclass(frozen=True)
class HostLink:
    """The host link of one device and where the figure comes from."""

    name: str  # "PCIe 4.0 x16", "NVLink-C2C"
    gbps: float  # per direction, theoretical
    source: str
    by_capability: bool = False  # picked from the compute capability, not the name

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "gbps": self.gbps, "source": self.source,
                "by_capability": self.by_capability}


def host_link(device_name: str | None,
              properties: Mapping[str, Any] | None = None) -> HostLink | None:
    """The host link of the device named ``device_name`` (``deviceProperties[].name``),
    or None: a CPU-only trace, an integrated part, or nothing to go on."""
    if device_name is None:
        return None
    if _UNIFIED.search(device_name):
        return None
    for pattern, link, src in _COMPILED:
        if pattern.search(device_name):
            return HostLink(link, LINK_GBPS[link], f"{src}; {_PCIE_SPEC}")
    if properties and not _is_amd(device_name, properties):
        try:
            cc = (int(properties.get("computeMajor")), int(properties.get("computeMinor")))
        except (TypeError, ValueError):
            return None
        link = _BY_CAPABILITY.get(cc)
        if link is not None:
            return HostLink(link, LINK_GBPS[link],
                            f"compute capability {cc[0]}.{cc[1]}: discrete parts of that "
                            f"architecture use {link}; {_PCIE_SPEC}", by_capability=True)
    return None


#: Device copies that cross the host link (CUPTI's memcpy names).
HOST_COPY = re.compile(r"^Memcpy (?:HtoD|DtoH)\b")
#: ...of which these stage through a pageable host buffer.
PAGEABLE_COPY = re.compile(r"Pageable")
