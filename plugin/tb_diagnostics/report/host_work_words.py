"""The headline's words for the launch cause's two parts: dispatch, and the host's own code
(``steps[].idle_host_work_us`` and ``host_work``, from ``analysis.views.host_work``).

It renders what the analysis measured; the shares below only choose the words.
"""

from __future__ import annotations

import re
from typing import Any

#: The launch cause is worded as the host's own work where at least this share of it is
#: (``steps[].idle_host_work_us``): "mostly" in the headline's sense; from
#: HOST_WORK_MENTION up, both parts are said with their shares, below it the dispatch only.
HOST_WORK_MOSTLY = 0.8
HOST_WORK_MENTION = 0.2
#: The launch cause when the host mostly ran code that launches nothing (CPU: calls no op).
_HOST_WORK_WORDS = {False: "while the CPU runs code that launches no device work",
                    True: "in code that calls no op"}
_MIXED_WORDS = {False: "while the CPU launches work or runs code that launches none",
                True: "in short op calls, their dispatch and code that calls no op"}


def host_work_share(same: list[dict[str, Any]], launch_us: float) -> float:
    """The share of the steps' launch cause that is the host's own work (0 for a document
    older than ``idle_host_work_us``)."""
    own = sum(s.get("idle_host_work_us") or 0.0 for s in same)
    return min(own / launch_us, 1.0) if launch_us > 0 else 0.0


def longest_host_work(same: list[dict[str, Any]]) -> str:
    """``; 215.33 ms in `video_classification.py(129): preprocess``` : the steps' longest
    stretch of the host's own work and the frame or label covering it
    (``steps[].host_work``); empty where none."""
    # Imported here, as headline.py does: the report's modules import no rule at load.
    from tb_diagnostics.names import short_name
    from tb_diagnostics.rules._util import fmt_us

    works = [s["host_work"] for s in same if s.get("host_work")]
    if not works:
        return ""
    top = max(works, key=lambda w: w["us"])
    # A Python frame by its file's own name: ``video_classification.py(129): preprocess``.
    frame = re.sub(r"^[^()]*/(?=[^/()]+\.py\(\d+\): )", "", top.get("frame") or "")
    where = f" in `{short_name(frame, 60)}`" if frame else ""
    if not where:  # no frame or label covers it: say what the figure is
        return f"; the longest stretch {fmt_us(top['us'])}" if len(works) > 1 else \
            f"; {fmt_us(top['us'])} in one stretch"
    longest = "the longest " if len(works) > 1 else ""
    return f"; {longest}{fmt_us(top['us'])}{where}"


def launch_words(own: float, cpu: bool) -> str:
    """The launch cause in words for a host-work share ``own`` of it ("" below
    :data:`HOST_WORK_MENTION`: the dispatch words stay)."""
    if own >= HOST_WORK_MOSTLY:
        return _HOST_WORK_WORDS[cpu]
    return _MIXED_WORDS[cpu] if own >= HOST_WORK_MENTION else ""
