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


_HAS_PSS = os.path.exists("/proc/self/smaps_rollup")


def _tree(pid: int) -> dict[int, int]:
    """The process and its descendants now: PID → resident pages."""
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
    tree, todo = {}, [pid]
    while todo:
        p = todo.pop()
        if p in rss:
            tree[p] = rss[p]
        todo += kids.get(p, [])
    return tree


def tree_rss(pid: int, tries: int = 5) -> int:
    """Resident bytes of a process and all its descendants (the parallel load's ranges,
    the writer's forked workers): the sum of their PSS, or of their RSS where a kernel
    has no ``smaps_rollup`` (before Linux 4.14).

    A sample counts only if the tree was the same before and after its reads: a fork
    between reading the parent (all its pages its own) and reading the new worker (half
    of them) would count the shared pages one and a half times, and a worker's exit the
    other way round."""
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    for _ in range(tries):
        before = _tree(pid)
        total, missed = 0, False
        for p, pages in before.items():
            if not _HAS_PSS:
                total += pages * page
                continue
            pss = _pss(p)
            if pss is None:
                # Exiting: its mappings are gone (and back with its parent), its RSS in
                # `before` is stale. Counting that RSS made 1.3 GB of shared pages 4 GB.
                missed = True
                continue
            total += pss
        if not missed and _tree(pid).keys() == before.keys():
            break
    return total  # after `tries` unsettled samples, the last: low, never double
