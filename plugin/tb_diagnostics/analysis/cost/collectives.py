"""Collectives: communication, not work the roofline can price.

A collective kernel waits on other ranks and moves data over NVLink / the network; its
time says nothing about how well the device's FLOPs or memory are used. The roofline
leaves it out of its unmodelled list and ``low-flop-utilisation`` out of its compute
time. An activity is a collective when its kernel name is one (NCCL/RCCL, PyTorch's
symmetric-memory all-reduce kernels, vLLM's custom all-reduce) or when the op that
launched it is one (``c10d::*``, ``record_param_comms``, ``symm_mem::*`` collectives).
"""

from __future__ import annotations

from tb_diagnostics.trace.categories import COLLECTIVE_OP, COMM_KERNEL

__all__ = ["COLLECTIVE_KERNEL", "COLLECTIVE_OP", "is_collective"]

#: Kernels that are collectives (device side): the one definition the step verdict's
#: compute busy uses too.
COLLECTIVE_KERNEL = COMM_KERNEL


def is_collective(name: str) -> bool:
    """True for the name of a collective op or kernel."""
    return bool(COLLECTIVE_OP.search(name) or COLLECTIVE_KERNEL.search(name))
