"""A live trace handler: ``torch.profiler.tensorboard_trace_handler``, plus one log line.

    prof = torch.profiler.profile(
        schedule=torch.profiler.schedule(wait=1, warmup=1, active=3),
        on_trace_ready=tb_diagnostics.trace_handler("./log/run1"),
    )

writes the same file the same way (torch's own handler writes it), then analyses that
file and logs one line per profiling cycle to the ``tb_diagnostics`` logger (and to
stderr when ``echo``)::

    tb-diagnostics: steps 3–5 overhead-bound (compute busy 4 %); top finding: …

The analysis runs in a child interpreter with a time budget (killed past it) and is skipped
above a size budget, so it can neither stall the training loop nor grow its memory: by
default the handler returns as soon as torch has written the file, and a background thread
waits for the child. Cycles are analysed one after another, in order, with at most one
analysis running and one cycle waiting: when profiling outpaces the analysis, a newer
cycle takes the waiting one's place and a line says the older was skipped, so neither
threads nor files pile up; at exit the program waits for the last cycle, which is never
skipped, within the time budget. Nothing it does raises into the loop
(errors are logged). torch is imported only when the handler is made, the engine (numpy)
only in the child.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

__all__ = ["cycle_line", "top_finding", "trace_handler"]

LOGGER_NAME = "tb_diagnostics"
#: Files larger than this are not analysed live (the tab or the CLI still can).
DEFAULT_MAX_BYTES = 256 << 20
#: The child analysing one cycle is killed after this many seconds.
DEFAULT_MAX_SECONDS = 60.0
_SEVERITY = {"critical": 0, "warning": 1, "info": 2}
#: The severities a cycle's line may name as its top finding (info notes are not news).
_ACTIONABLE = frozenset({"critical", "warning"})


def _step_range(numbers: list[int]) -> str:
    if not numbers:
        return "the span"
    lo, hi = min(numbers), max(numbers)
    if len(numbers) == 1:
        return f"step {lo}"
    return f"steps {lo}–{hi}" if hi - lo + 1 == len(numbers) else \
        f"steps {', '.join(map(str, numbers))}"


def cycle_line(span: dict[str, Any]) -> str:
    """The one-line summary of a span document (one entry of the report's ``spans``)."""
    if span.get("errors") and not span.get("steps"):
        return f"tb-diagnostics: {span['errors'][0]}"
    # Not the stub a mid-cycle stop leaves (the profiler's last step() opened it, nothing
    # ran in it: the step's "stub" field): the line is about the steps that ran.
    steps = [s for s in span.get("steps") or [] if not s.get("stub")]
    numbers = [s["step"] for s in steps if s["step"] is not None]
    verdicts = Counter(s["verdict"] for s in steps)
    verdict = span.get("verdict") or (verdicts.most_common(1)[0][0] if verdicts else "unknown")
    wall = sum(s["wall_us"] for s in steps)
    # Compute, as the verdict reads it (collective kernels are communication); a document
    # older than compute_busy_us has device busy only, and says so.
    computed = all(s.get("compute_busy_us") is not None for s in steps)
    busy = sum(s["compute_busy_us" if computed else "device_busy_us"] for s in steps)
    share = f"{100 * busy / wall:.0f} %" if wall > 0 else "?"
    kind = (span.get("device") or {}).get("kind")
    # CPU-only: the CPU is the device.
    what = "CPU busy" if kind == "cpu" else "compute busy" if computed else "device busy"
    head = f"tb-diagnostics: {_step_range(numbers)} {verdict} ({what} {share})"
    if len(verdicts) > 1:
        head += " [" + ", ".join(f"{n} {v}" for v, n in verdicts.most_common()) + "]"
    if steps and all("inferred" in s.get("flags", ()) for s in steps):
        head += " (steps inferred)"
    top = top_finding(span.get("findings") or [])
    if top is not None:
        message = " ".join(str(top.get("message", "")).split())
        if len(message) > 160:
            message = message[:159] + "…"
        head += f"; top finding: {top['rule']}: {message}"
    return head


def top_finding(findings: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The finding a cycle's line names: the most severe, then the largest saving; never an
    info note (a fusion with nothing to remove, a profiler artefact), so None where only
    those are."""
    actionable = [f for f in findings
                  if f.get("severity") in _ACTIONABLE and not f.get("artefact")]
    if not actionable:
        return None
    # min: the first of equals in the report's order (the rules' own order) wins a tie.
    return min(actionable, key=lambda f: (_SEVERITY[f["severity"]],
                                          -(f.get("savings_us") or 0.0)))


class _LatestCycles:
    """The cycles' analyses, one at a time in cycle order, in one background thread: at
    most one running and one waiting. A cycle written while another waits takes its place
    (``skipped`` is told of the older), so a training loop that profiles faster than the
    cycles are analysed queues neither threads nor work; the last cycle is never skipped."""

    def __init__(self, analyse: Callable[[list[str]], None],
                 skipped: Callable[[list[str]], None]) -> None:
        self._analyse = analyse
        self._skipped = skipped
        self._cond = threading.Condition()
        self._running = False
        self._waiting: list[str] | None = None

    def submit(self, paths: list[str]) -> None:
        with self._cond:
            dropped = None
            if self._running:
                dropped, self._waiting = self._waiting, paths
            else:
                # Decided here, not by the thread: a cycle never waits while none runs.
                self._running = True
                threading.Thread(target=self._work, args=(paths,), daemon=True,
                                 name="tb-diagnostics-cycle").start()
        if dropped is not None:
            self._skipped(dropped)

    def _work(self, paths: list[str] | None) -> None:
        while paths is not None:
            try:
                self._analyse(paths)
            finally:
                with self._cond:
                    paths, self._waiting = self._waiting, None
                    if paths is None:
                        self._running = False
                        self._cond.notify_all()

    def wait(self, timeout: float | None = None) -> bool:
        """Whether the cycles so far were all analysed or skipped within ``timeout``."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._running, timeout)


class _Recorder:
    """The profiler, as torch's handler sees it, noting the path it exports to."""

    def __init__(self, prof: Any) -> None:
        self._prof = prof
        self.paths: list[str] = []

    def export_chrome_trace(self, path: str, *args: Any, **kwargs: Any) -> Any:
        self.paths.append(os.fspath(path))
        return self._prof.export_chrome_trace(path, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._prof, name)


def _site_dirs() -> set[str]:
    import site

    dirs = [*getattr(site, "getsitepackages", list)(), site.getusersitepackages()]
    return {os.path.abspath(d) for d in dirs}


def _analyse(path: str, max_seconds: float, cache: bool) -> str:
    """The cycle's line, from a child interpreter killed past ``max_seconds``."""
    cmd = [sys.executable, "-m", "tb_diagnostics.handler", path]
    if cache:
        cmd.append("--cache")
    env = dict(os.environ)
    # The child imports this package the way the parent did: an installed one it finds by
    # itself; a source tree on sys.path is passed on (never a site directory, which on
    # PYTHONPATH would come before the standard library).
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if here not in _site_dirs():
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [here, env.get("PYTHONPATH")]))
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=max_seconds,
                              env=env, check=False)
    except subprocess.TimeoutExpired:
        return (f"tb-diagnostics: note: {os.path.basename(path)} was not analysed live: it "
                f"took more than {max_seconds:g} s (max_seconds); run tb-diagnostics report "
                "on the log dir")
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"the analysis of {os.path.basename(path)} failed: {tail}")
    return json.loads(proc.stdout)["line"]


def trace_handler(dir_name: str | os.PathLike[str], worker_name: str | None = None,
                  use_gzip: bool = False, *, echo: bool = True,
                  logger: logging.Logger | None = None,
                  max_bytes: int = DEFAULT_MAX_BYTES,
                  max_seconds: float = DEFAULT_MAX_SECONDS,
                  cache: bool = False, background: bool = True) -> Callable[[Any], None]:
    """A drop-in for ``torch.profiler.tensorboard_trace_handler`` that also says, after
    each profiling cycle, what its steps were bound by.

    ``dir_name``, ``worker_name`` and ``use_gzip`` are torch's, and torch's handler writes
    the file. Then one line goes to ``logger`` (default: the ``tb_diagnostics`` logger, at
    INFO) and, when ``echo``, to stderr. A file over ``max_bytes`` is not analysed, an
    analysis past ``max_seconds`` is stopped; either way a note says so. ``cache`` lets
    the analysis write the engine's cache (the tab then opens the file at once). Nothing
    is raised into the training loop: a trace torch could not write is logged as an
    error, an analysis that failed as a warning. With ``background`` (the default) the
    analysis runs while training goes on, and the line follows a few seconds later; one
    cycle is analysed at a time, and of the cycles written meanwhile only the newest
    waits (a line names each one skipped); the handler's ``wait()`` blocks until every
    cycle so far is analysed or skipped, as the program's exit does. Without it, the
    handler returns once the line is out.
    """
    from torch.profiler import tensorboard_trace_handler

    write = tensorboard_trace_handler(os.fspath(dir_name), worker_name=worker_name,
                                      use_gzip=use_gzip)
    log = logger or logging.getLogger(LOGGER_NAME)

    def say(line: str, level: int = logging.INFO) -> None:
        log.log(level, "%s", line)
        if echo:
            print(line, file=sys.stderr, flush=True)

    def skipped(paths: list[str]) -> None:
        names = ", ".join(os.path.basename(p) for p in paths)
        say(f"tb-diagnostics: note: {names} was not analysed live: a newer cycle was "
            "written before its turn (the analysis is slower than profiling); run "
            "tb-diagnostics report on the log dir")

    cycles = _LatestCycles(lambda paths: analyse_paths(paths), skipped)  # defined below
    exit_waits: list[bool] = []  # once registered with atexit (a list: set from a closure)

    def wait(timeout: float | None = None) -> None:
        """Block until every cycle written so far is analysed or skipped (or ``timeout``)."""
        cycles.wait(timeout)

    def handler(prof: Any) -> None:
        rec = _Recorder(prof)
        try:
            write(rec)  # torch's handler, unchanged: the same file, written the same way
        except Exception as exc:  # a full disk must not end the training run either
            say(f"tb-diagnostics: the trace could not be written: {exc}", logging.ERROR)
            return
        if not background:
            analyse_paths(rec.paths)
            return
        if not exit_waits:  # the first cycle: let the program's exit wait for the last line
            # (the one running, then the last cycle waiting: two budgets at most)
            atexit.register(wait, 2 * max_seconds + 5.0)
            exit_waits.append(True)
        cycles.submit(rec.paths)

    def analyse_paths(paths: list[str]) -> None:
        try:
            for path in paths:
                size = os.path.getsize(path)
                if size > max_bytes:
                    say(f"tb-diagnostics: note: {os.path.basename(path)} was not analysed "
                        f"live: {size / 2**20:.0f} MiB is over max_bytes "
                        f"({max_bytes / 2**20:.0f} MiB); run tb-diagnostics report on the "
                        "log dir")
                    continue
                started = time.monotonic()
                line = _analyse(path, max_seconds, cache)
                log.debug("analysed %s in %.2f s", path, time.monotonic() - started)
                say(line)
        except Exception as exc:  # the training loop must go on whatever happened here
            say(f"tb-diagnostics: could not analyse the profiling cycle: {exc}",
                logging.WARNING)

    handler.wait = wait  # type: ignore[attr-defined]
    return handler


def _main(argv: list[str]) -> int:
    """The child: analyse one file, print ``{"line": …}``."""
    from tb_diagnostics.api import analyze

    path = argv[0]
    report = analyze(path, cache="--cache" in argv[1:], workers=1)
    spans = [s for r in report.document["runs"] for w in r["workers"] for s in w["spans"]]
    line = cycle_line(spans[0]) if spans else f"tb-diagnostics: no trace in {path}"
    sys.stdout.write(json.dumps({"line": line}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
