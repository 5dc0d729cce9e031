"""The resident memory of a process tree, from /proc (the parallel load's workers count,
and so do the JSON writer's forked workers, without counting twice what they share)."""

from __future__ import annotations

import os
from pathlib import Path


def _pss(pid: int) -> int | None:
    """A process's proportional set size in bytes: its resident pages, each page shared
    with other processes divided among them. A forked worker's RSS holds every page of
    its parent it still shares copy-on-write; summing RSS would count those twice."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def tree_rss(pid: int) -> int:
    """Resident bytes of a process and all its descendants (the parallel load's ranges,
    the writer's forked workers): the sum of their PSS, or of their RSS where a kernel
    has no ``smaps_rollup`` (before Linux 4.14)."""
    parent, rss = {}, {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        p = int(stat.parent.name)
        parent[p], rss[p] = int(fields[1]), int(fields[21])  # ppid, resident pages
    kids: dict[int, list[int]] = {}
    for p, pp in parent.items():
        kids.setdefault(pp, []).append(p)
    page = os.sysconf("SC_PAGE_SIZE")
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        if p in rss:
            pss = _pss(p)
            total += pss if pss is not None else rss[p] * page
        todo += kids.get(p, [])
    return total
