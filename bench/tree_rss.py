"""The resident memory of a process tree, from /proc (the parallel load's workers count)."""

from __future__ import annotations

import os
from pathlib import Path


def tree_rss(pid: int) -> int:
    """Resident bytes of a process and all its descendants (the parallel load's ranges)."""
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
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        todo += kids.get(p, [])
    return total * os.sysconf("SC_PAGE_SIZE")
