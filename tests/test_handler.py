"""tb_diagnostics.trace_handler in a real (small, CPU) profiled loop: torch's file, plus one
verdict line per profiling cycle; budgets and failures end in a logged line, never a raise."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

import tb_diagnostics

torch = pytest.importorskip("torch")

LINE = re.compile(r"^tb-diagnostics: steps? \d+(?:–\d+)? [a-z-]+ \((?:CPU|device) busy \d+ %\)")


def profiled_loop(handler, cycles: int = 1, active: int = 2) -> None:
    model = torch.nn.Linear(32, 32)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.profiler.schedule(wait=0, warmup=1, active=active, repeat=cycles)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                schedule=sched, on_trace_ready=handler) as prof:
        for _ in range(cycles * (active + 1)):
            opt.zero_grad()
            model(torch.randn(16, 32)).sum().backward()
            opt.step()
            prof.step()


@pytest.mark.slow
def test_a_profiled_loop_writes_the_trace_and_logs_its_verdict(tmp_path, caplog, capsys):
    caplog.set_level(logging.INFO, logger="tb_diagnostics")
    run = tmp_path / "log" / "run"
    handler = tb_diagnostics.trace_handler(run, worker_name="w0", use_gzip=True)
    profiled_loop(handler, cycles=2)  # training goes on while the cycles are analysed
    handler.wait(120)
    files = sorted(run.iterdir())
    # The files torch's own handler names: worker, timestamp, gzip suffix.
    assert len(files) == 2 and all(re.fullmatch(r"w0\.\d+\.pt\.trace\.json\.gz", f.name)
                                   for f in files)
    lines = [r.getMessage() for r in caplog.records if r.name == "tb_diagnostics"]
    assert len(lines) == 2, lines
    assert all(LINE.match(x) for x in lines), lines
    assert lines[0].startswith("tb-diagnostics: steps 1–2 ")
    # echo: the same lines on stderr.
    assert capsys.readouterr().err.count("tb-diagnostics: steps ") == 2
    # The line is the report's: its verdict is the span's headline verdict.
    report = tb_diagnostics.analyze(files[0], cache=False)
    (span,) = [s for r in report.document["runs"] for w in r["workers"] for s in w["spans"]]
    assert f" {span['verdict']} (" in lines[0]


@pytest.mark.slow
def test_budgets_skip_with_a_note(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="tb_diagnostics")
    # In the foreground: the handler returns once its line is out.
    profiled_loop(tb_diagnostics.trace_handler(tmp_path / "a", echo=False, max_bytes=10,
                                               background=False))
    profiled_loop(tb_diagnostics.trace_handler(tmp_path / "b", echo=False, max_seconds=0.01,
                                               background=False))
    lines = [r.getMessage() for r in caplog.records if r.name == "tb_diagnostics"]
    assert len(lines) == 2
    assert "not analysed live" in lines[0] and "max_bytes" in lines[0]
    assert "not analysed live" in lines[1] and "max_seconds" in lines[1]
    assert len(list((tmp_path / "a").iterdir())) == len(list((tmp_path / "b").iterdir())) == 1


class _FakeProfiler:
    """What torch's handler calls: export_chrome_trace(path, ...)."""

    def __init__(self, text: str | None) -> None:
        self.text = text

    def export_chrome_trace(self, path: str, **_: object) -> None:
        if self.text is None:
            raise OSError("No space left on device")
        Path(path).write_text(self.text)


def test_failures_are_logged_never_raised(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="my.training")
    own = logging.getLogger("my.training")
    handler = tb_diagnostics.trace_handler(tmp_path / "run", worker_name="w0", echo=False,
                                           logger=own)
    handler(_FakeProfiler(None))  # torch could not write the file
    handler(_FakeProfiler("{not json"))  # a file the engine cannot read
    handler.wait(60)
    records = [r for r in caplog.records if r.name == "my.training"]
    assert len(records) == 2
    assert records[0].levelno == logging.ERROR and "No space left" in records[0].getMessage()
    assert records[1].getMessage().startswith("tb-diagnostics: ")
    assert "w0." in records[1].getMessage()  # the unreadable file is named


def test_cycle_line_of_a_span_document():
    from tb_diagnostics.handler import cycle_line

    span = {"verdict": "overhead-bound", "device": {"kind": "cuda"}, "errors": [],
            "steps": [{"step": n, "wall_us": 100.0, "device_busy_us": 4.0,
                       "verdict": "overhead-bound", "flags": []} for n in (3, 4, 5)],
            "findings": [{"rule": "tiny-kernels", "severity": "info", "message": "b"},
                         {"rule": "host-sync", "severity": "warning", "savings_us": 5.0,
                          "message": "cudaDeviceSynchronize   blocked\nthe host"}]}
    assert cycle_line(span) == ("tb-diagnostics: steps 3–5 overhead-bound (device busy 4 %); "
                                "top finding: host-sync: cudaDeviceSynchronize blocked the host")


def test_cycle_line_says_compute_busy_as_the_verdict_reads_it():
    from tb_diagnostics.handler import cycle_line

    # 60 µs of each 100 µs step is a collective kernel: busy 64 %, computing 4 %.
    span = {"verdict": "communication-bound", "device": {"kind": "cuda"}, "errors": [],
            "steps": [{"step": n, "wall_us": 100.0, "device_busy_us": 64.0,
                       "compute_busy_us": 4.0, "verdict": "communication-bound",
                       "flags": []} for n in (3, 4)],
            "findings": []}
    assert cycle_line(span) == "tb-diagnostics: steps 3–4 communication-bound (compute busy 4 %)"


def test_the_training_loop_does_not_wait_for_the_analysis(tmp_path, caplog, monkeypatch):
    """The handler returns once torch has written the file; the line follows."""
    import threading

    from tb_diagnostics import handler as handler_mod

    caplog.set_level(logging.INFO, logger="tb_diagnostics")
    gate = threading.Event()

    def slow_analysis(path, max_seconds, cache):
        gate.wait(30)  # the child still analysing
        return f"tb-diagnostics: analysed {Path(path).name}"

    monkeypatch.setattr(handler_mod, "_analyse", slow_analysis)
    handler = tb_diagnostics.trace_handler(tmp_path / "run", worker_name="w0", echo=False)
    handler(_FakeProfiler('{"traceEvents": []}'))
    handler(_FakeProfiler('{"traceEvents": []}'))
    assert len(list((tmp_path / "run").iterdir())) == 2  # both written, neither analysed
    assert not [r for r in caplog.records if r.name == "tb_diagnostics"]
    gate.set()
    handler.wait(30)
    lines = [r.getMessage() for r in caplog.records if r.name == "tb_diagnostics"]
    names = sorted(p.name for p in (tmp_path / "run").iterdir())
    assert lines == [f"tb-diagnostics: analysed {n}" for n in names]  # in cycle order


def test_the_top_finding_is_never_an_info_note():
    """Issue 29 item 3: the most severe finding, then the largest saving; an info note
    ("addmm-fusion … nothing to remove") or a profiler artefact is no top finding."""
    from tb_diagnostics.handler import cycle_line, top_finding

    def finding(rule, severity, saving=None, **kw):
        return {"rule": rule, "severity": severity, "savings_us": saving,
                "message": f"{rule} says", **kw}

    info = finding("addmm-fusion", "info")
    assert top_finding([info, finding("hotspot-op", "info", 900.0)]) is None
    small = finding("host-sync", "warning", 5.0)
    big = finding("gpu-idle-gap", "warning", 50.0)
    none = finding("cold-start-step", "warning")
    assert top_finding([info, none, small, big]) is big
    critical = finding("dataloader-bottleneck", "critical", 1.0)
    assert top_finding([big, critical, info]) is critical
    artefact = finding("launch-delay", "warning", 500.0, artefact=True)
    assert top_finding([artefact, small]) is small
    span = {"verdict": "compute-bound", "device": {"kind": "cpu"}, "errors": [],
            "steps": [{"step": 2, "wall_us": 100.0, "compute_busy_us": 90.0,
                       "device_busy_us": 90.0, "verdict": "compute-bound", "flags": []}],
            "findings": [info]}
    assert cycle_line(span) == "tb-diagnostics: step 2 compute-bound (CPU busy 90 %)"


def test_a_slow_analysis_keeps_one_cycle_waiting_the_newest(tmp_path, caplog, monkeypatch):
    """Issue 29 item 11: profiling faster than the analysis queues no thread per cycle. One
    analysis runs and one cycle waits; a newer cycle takes the waiting one's place and a
    line says which was skipped; the last cycle is always analysed."""
    import threading

    from tb_diagnostics import handler as handler_mod

    caplog.set_level(logging.INFO, logger="tb_diagnostics")
    gate = threading.Event()
    analysed: list[str] = []

    def slow_analysis(path, max_seconds, cache):
        gate.wait(30)
        analysed.append(Path(path).name)
        return f"tb-diagnostics: analysed {Path(path).name}"

    def cycle_threads() -> int:
        return sum(t.name == "tb-diagnostics-cycle" for t in threading.enumerate())

    monkeypatch.setattr(handler_mod, "_analyse", slow_analysis)
    handler = tb_diagnostics.trace_handler(tmp_path / "run", worker_name="w0", echo=False)
    for _ in range(5):  # torch's handler names each file by time_ns: in cycle order
        handler(_FakeProfiler('{"traceEvents": []}'))
        assert cycle_threads() <= 1
    names = sorted(p.name for p in (tmp_path / "run").iterdir())
    assert len(names) == 5
    notes = [r.getMessage() for r in caplog.records if r.name == "tb_diagnostics"]
    # Cycles 2-4 each waited until a newer one came: skipped, each said so.
    assert len(notes) == 3 and all("was not analysed live: a newer cycle" in n for n in notes)
    assert [n.split()[2] for n in notes] == names[1:4]
    gate.set()
    handler.wait(30)
    assert analysed == [names[0], names[4]]  # the first, then the last: nothing else waited
    lines = [r.getMessage() for r in caplog.records if r.name == "tb_diagnostics"][3:]
    assert lines == [f"tb-diagnostics: analysed {n}" for n in (names[0], names[4])]


def test_the_last_cycle_is_analysed_at_exit(tmp_path):
    """The program ends right after its last cycle, the analysis still running: its exit
    waits for the running cycle and then the last one (none is lost)."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(f'''
        import time
        from pathlib import Path
        import tb_diagnostics
        from tb_diagnostics import handler as handler_mod

        def slow_analysis(path, max_seconds, cache):
            time.sleep(1.0)
            return f"tb-diagnostics: analysed {{Path(path).name}}"

        handler_mod._analyse = slow_analysis

        class Prof:
            def export_chrome_trace(self, path, **_):
                Path(path).write_text('{{"traceEvents": []}}')

        h = tb_diagnostics.trace_handler({str(tmp_path / "run")!r}, worker_name="w0")
        for k in range(3):
            h(Prof())
            time.sleep(0.01)
    ''')
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    names = sorted(p.name for p in (tmp_path / "run").iterdir())
    assert len(names) == 3, names
    err = proc.stderr.splitlines()
    assert f"tb-diagnostics: analysed {names[0]}" in err
    assert f"tb-diagnostics: analysed {names[2]}" in err  # the last one, at exit
    assert any(line.startswith(f"tb-diagnostics: note: {names[1]} was not analysed live")
               for line in err), err
