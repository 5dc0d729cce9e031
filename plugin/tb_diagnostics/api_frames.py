"""The records and DataFrames of a :class:`~tb_diagnostics.api.Report`.

:class:`ReportFrames` is the part of the Report that flattens its document into one
record per step or per finding (and their pandas DataFrames), and that turns the
Kernels, Operators, Modules and Memory views of every span into DataFrames. The Report
(``api.py``) adds the renderings and the comparison; pandas stays an optional extra,
imported only when a frame is asked for.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from tb_diagnostics.analysis.verdict import Thresholds
    from tb_diagnostics.cache import TraceCache
    from tb_diagnostics.logdir import LogDir

#: The first columns of :meth:`Report.steps_frame`, in this order (present in every frame,
#: NaN where no step has them); the steps' other keys follow.
STEP_COLUMNS = ("run", "worker", "span", "file", "rank", "step", "start_us", "wall_us",
                "device_busy_us", "device_busy", "compute_busy_us", "compute_busy",
                "exposed_collective_us", "verdict", "verdict_reason", "main_idle_cause", "cold",
                "stub", "backlog_start", "backlog_end", "backlog_start_us", "backlog_end_us",
                "backlog_trend", "launch_queue_us", "host_period_us", "device_work_us",
                "host_blocked_us", "host_limited", "path_host_us", "path_input_us",
                "path_device_us", "path_comm_us", "path_latency_us")
#: The first columns of :meth:`Report.findings`.
FINDING_COLUMNS = ("run", "worker", "span", "file", "rule", "severity", "title", "message",
                   "steps", "savings_us")
_PANDAS_MISSING = ("this needs pandas, an optional extra of tb-diagnostics: "
                   "pip install 'tb-diagnostics[pandas]'")


def _pandas():
    try:
        import pandas
    except ImportError as exc:
        raise ImportError(_PANDAS_MISSING) from exc
    return pandas


class ReportFrames:
    """Records and DataFrames of a report's document; mixed into :class:`Report`, which
    holds the fields below (a dataclass: annotations on this plain base are not fields)."""

    document: dict[str, Any]
    logdir: LogDir
    thresholds: Thresholds | None
    cache: TraceCache | None

    def _spans(self) -> Iterator[tuple[str, str, dict[str, Any]]]:
        for r in self.document["runs"]:
            for w in r["workers"]:
                for s in w["spans"]:
                    yield r["run"], w["worker"], s

    def steps(self) -> list[dict[str, Any]]:
        """One dict per step of every span, in report order.

        Keys: ``run``, ``worker``, ``span``, ``file``, ``rank`` (None outside distributed
        runs), then every key of the step in the document (``step``, ``start_us``,
        ``wall_us``, ``device_busy_us``, ``device_busy``, ``compute_busy_us``,
        ``compute_busy`` (what the verdict reads), ``verdict``, ``verdict_reason``,
        ``main_idle_cause``, ``cold``, ``stub`` (True for the empty last step the
        profiler's last ``step()`` opened: neither warm nor cold, judged by nothing), the
        launch backlog's keys, ``flags``, ``flag_why`` (why the step is flagged
        ``artefact``, in words, or None), ``flop_utilisation``, ``critical_path`` (the
        step's bounded path: ``total_us``, ``by_kind``, its longest ``segments``;
        :meth:`critical_path_frame` gives one row per segment)…), with the idle causes
        flattened (``input_us``, ``sync_us``, ``launch_us``, ``other_us``, ``profiler_us``,
        ``compile_us``, ``module_load_us``…). Where an idle key is also a step key
        (``comm_us``, the step's communication time), the idle one is prefixed:
        ``idle_comm_us``. The critical path's split is flattened too: ``path_host_us``,
        ``path_input_us``, ``path_device_us``, ``path_comm_us``, ``path_latency_us`` (they
        add up to the path's ``total_us``, the step's wall within 1 %; in
        :meth:`steps_frame` NaN for a step of a document without paths).
        """
        out = []
        for run, worker, span in self._spans():
            rank = (span.get("distributed") or {}).get("rank")
            for st in span["steps"]:
                row: dict[str, Any] = {"run": run, "worker": worker, "span": span["span"],
                                       "file": span["file"], "rank": rank}
                row.update((k, v) for k, v in st.items() if k != "idle")
                for k, v in (st.get("idle") or {}).items():
                    row[f"idle_{k}" if k in st else k] = v
                # The critical path's split, flattened: path_host_us, path_device_us…
                for k, v in ((st.get("critical_path") or {}).get("by_kind") or {}).items():
                    row[f"path_{k}_us"] = v
                row["flags"] = list(st.get("flags") or [])
                out.append(row)
        return out

    def findings(self) -> list[dict[str, Any]]:
        """One dict per finding: ``run``, ``worker``, ``span``, ``file`` and the finding's
        own fields (``rule``, ``severity``, ``title``, ``message``, ``steps``,
        ``savings_us``, ``evidence``…). Findings about a whole distributed run
        (stragglers, imbalance) have ``worker``, ``span`` and ``file`` None."""
        out = []
        for r in self.document["runs"]:
            for w in r["workers"]:
                for s in w["spans"]:
                    out.extend({"run": r["run"], "worker": w["worker"], "span": s["span"],
                                "file": s["file"], **f} for f in s["findings"])
            out.extend({"run": r["run"], "worker": None, "span": None, "file": None, **f}
                       for f in r.get("findings") or [])
        return out

    def steps_frame(self) -> pd.DataFrame:
        """:meth:`steps` as a pandas DataFrame (needs ``tb-diagnostics[pandas]``); ``rank``
        is an integer column, pandas' nullable ``Int64`` where a span has no rank."""
        df = self._frame(self.steps(), STEP_COLUMNS)
        # pandas makes [0, None] floats (0.0, NaN): a rank is a count, never 0.5.
        ranks = df["rank"]
        df["rank"] = ranks.astype("int64" if ranks.notna().all() else "Int64")
        return df

    def findings_frame(self) -> pd.DataFrame:
        """:meth:`findings` as a pandas DataFrame (needs ``tb-diagnostics[pandas]``)."""
        return self._frame(self.findings(), FINDING_COLUMNS)

    def kernels_frame(self, *, step: str | int | None = None, group: str = "name",
                      sort: str | None = None, limit: int = 1000) -> pd.DataFrame:
        """The Kernels view (``tb-diagnostics kernels``) of every span, one row per kernel
        group (``group="op"``: per kernel and launching op), with ``run``, ``worker``,
        ``span`` first; ``step`` limits it to one step. Reads each span's analysis again
        (from the cache when it is on)."""
        return self._view_frame("kernels", step, group, sort, limit, None)

    def ops_frame(self, *, step: str | int | None = None, group: str = "name",
                  sort: str | None = None, module: int | None = None,
                  limit: int = 1000) -> pd.DataFrame:
        """The Operators view (``tb-diagnostics ops``) of every span: one row per op name
        (``group="shapes"``: per name and input dims) with calls, host and device total and
        self µs, ``run``, ``worker``, ``span`` first; ``step`` limits it to one step,
        ``module`` (a Modules row's ``id``) to the ops under that module."""
        extra = None if module is None else {"module": str(module)}
        return self._view_frame("ops", step, group, sort, limit, extra)

    def modules_frame(self, *, step: str | int | None = None, sort: str | None = None,
                      limit: int = 1000) -> pd.DataFrame:
        """The Modules view (``tb-diagnostics modules``) of every span: the nn.Module tree
        in pre-order, one row per module node (``id``, ``parent``, ``depth``, ``path``,
        calls, host and device µs), ``run``, ``worker``, ``span`` first."""
        return self._view_frame("modules", step, None, sort, limit, None)

    def memory_frame(self, *, step: str | int | None = None, group: str = "op",
                     sort: str | None = None, device: str | None = None,
                     limit: int = 1000) -> pd.DataFrame:
        """The Memory view (``tb-diagnostics memory``) of every span: the allocations alive
        at each device's peak, one row per op that made them (``group="inner"``: per op
        that called the allocator) with ``device``, ``bytes``, ``count``,
        ``largest_bytes`` and the largest one's call path, ``run``, ``worker``, ``span``
        first; ``step`` takes the step's own peak, ``device`` ("CUDA 0") one device. The
        curves and per-step figures are in ``tb-diagnostics memory --format json``."""
        extra = None if device is None else {"device": device}
        return self._view_frame("memory", step, group, sort, limit, extra)

    def critical_path_frame(self, *, step: int | None = None) -> pd.DataFrame:
        """Every step's critical path (``step``: step N's only), one row per segment in
        step and time order: ``run``, ``worker``, ``span``, ``file``, ``step``, ``kind``
        (host, input, device, comm, latency), ``name`` (the event), ``op`` (the operator
        it belongs to), ``start_us``, ``dur_us``, ``row``. The report document holds each
        step's longest segments; this reads each span's analysis again (from the cache
        when it is on) for all of them."""
        from tb_diagnostics.report.critical_path_records import (
            CRITICAL_PATH_COLUMNS,
            critical_path_records,
        )

        records = critical_path_records(self.logdir, self.thresholds, self.cache, step)
        return self._frame(records, CRITICAL_PATH_COLUMNS)

    def _view_frame(self, name: str, step: str | int | None, group: str | None,
                    sort: str | None, limit: int, extra: dict[str, str] | None) -> pd.DataFrame:
        from tb_diagnostics.opening import open_analysis
        from tb_diagnostics.report.views import MAX_LIMIT, ViewParams, all_views

        view = all_views()[name]
        params = ViewParams(step=None if step is None else str(step), group=group, sort=sort,
                            limit=max(1, min(limit, MAX_LIMIT)), extra=extra)
        records = []
        for r in self.logdir.runs:
            for w in r.workers:
                for f in w.spans:
                    doc = view.document(open_analysis(f, self.thresholds, self.cache), params)
                    records.extend({"run": r.name, "worker": w.name, "span": f.span, **row}
                                   for row in doc[view.rows_key])
        return self._frame(records, ("run", "worker", "span", *view.columns))

    @staticmethod
    def _frame(records: list[dict[str, Any]], first: tuple[str, ...]) -> pd.DataFrame:
        pd = _pandas()
        # Columns in a stable order, present even when there are no records.
        seen = list(first)
        for rec in records:
            seen.extend(k for k in rec if k not in seen)
        return pd.DataFrame.from_records(records, columns=seen)
