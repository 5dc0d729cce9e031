"""One odd file never sinks a report; one odd event never sinks a file (issue: hardening)."""

from __future__ import annotations

import json

from tb_diagnostics.cli import main


def _write(path, events, **top) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"traceEvents": events, **top}))


def _ops(n: int = 50) -> list[dict]:
    out = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": 1,
            "tid": 1, "ts": s * 1000, "dur": 999} for s in range(3)]
    out += [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
             "ts": 10 + 20 * i, "dur": 15} for i in range(n)]
    return out


def _spans(doc: dict) -> dict[str, dict]:
    return {s["file"]: s for r in doc["runs"] for w in r["workers"] for s in w["spans"]}


def test_an_absurd_step_number_does_not_sink_the_other_runs(tmp_path, capsys):
    log = tmp_path / "log"
    _write(log / "odd" / "w.1.pt.trace.json",
           [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#99999999999999999999999",
             "pid": 1, "tid": 1, "ts": 0, "dur": 100},
            {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 10,
             "dur": 50}])
    _write(log / "good" / "w.1.pt.trace.json", _ops())
    assert main(["report", str(log), "--format", "json", "--no-cache"]) == 0
    spans = _spans(json.loads(capsys.readouterr().out))
    assert [s["step"] for s in spans["good/w.1.pt.trace.json"]["steps"]] == [0, 1, 2]
    odd = spans["odd/w.1.pt.trace.json"]
    assert odd["errors"] == [] and [s["step"] for s in odd["steps"]] == [None]


def test_one_event_with_args_of_the_wrong_type_is_counted_not_fatal(tmp_path, capsys):
    events = _ops(2000)
    events[1200]["args"] = "oops"
    events[1300]["args"] = [1, 2]
    events[1400]["dur"] = -5
    events[1500]["ph"] = 7
    _write(tmp_path / "log" / "run" / "w.1.pt.trace.json", events)
    assert main(["report", str(tmp_path / "log"), "--format", "json", "--no-cache"]) == 0
    (span,) = _spans(json.loads(capsys.readouterr().out)).values()
    assert span["errors"] == []
    notes = " | ".join(span["notes"])
    assert "2 event(s) normalised: args not an object" in notes
    assert "1 event(s) normalised: negative or absurd dur (taken as 0)" in notes
    assert "1 event(s) normalised: ph not a string" in notes
    assert span["steps"][1]["ops"] > 0


def test_analysis_failures_are_one_line_and_tracebacks_only_with_debug(tmp_path, capsys,
                                                                       monkeypatch):
    from tb_diagnostics.report import document

    _write(tmp_path / "log" / "run" / "w.1.pt.trace.json", _ops())
    _write(tmp_path / "log" / "other" / "w.1.pt.trace.json", _ops())
    real = document.run_rules

    def run_rules(analysis):
        if "other" in analysis.model.path:
            raise ZeroDivisionError("boom")
        return real(analysis)

    monkeypatch.setattr(document, "run_rules", run_rules)
    assert main(["report", str(tmp_path / "log"), "--format", "json", "--no-cache",
                 "--workers", "1"]) == 0
    out = capsys.readouterr()
    spans = _spans(json.loads(out.out))
    (err,) = spans["other/w.1.pt.trace.json"]["errors"]
    assert err == "other/w.1.pt.trace.json: could not be analysed (ZeroDivisionError: boom)"
    assert spans["run/w.1.pt.trace.json"]["errors"] == []
    assert "Traceback" not in out.err
    assert main(["--debug", "report", str(tmp_path / "log"), "--format", "json", "--no-cache",
                 "--workers", "1"]) == 0
    assert "Traceback" in capsys.readouterr().err


def test_output_paths_that_cannot_be_written_are_refused_first(tmp_path, capsys):
    _write(tmp_path / "log" / "run" / "w.1.pt.trace.json", _ops())
    log = str(tmp_path / "log")
    for out, why in [(str(tmp_path / "missing" / "r.json"), "no directory"),
                     (str(tmp_path), "it is a directory")]:
        assert main(["report", log, "--no-cache", "-o", out]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and why in err and out in err
    assert main(["report", log, "--no-cache", "-o", "/dev/full"]) == 2
    assert "No space left on device" in capsys.readouterr().err


def test_cli_arguments_that_make_no_sense_are_refused(tmp_path, capsys):
    import pytest

    assert main(["report", ""]) == 2
    assert "LOGDIR is empty" in capsys.readouterr().err
    for flag in (["--cpu-heavy-self-us", "nan"], ["--compute-bound", "nan"]):
        with pytest.raises(SystemExit):
            main(["report", str(tmp_path), *flag])
        assert "must be" in capsys.readouterr().err
    _write(tmp_path / "log" / "run" / "w.1.pt.trace.json", _ops())
    assert main(["report", str(tmp_path / "log"), "--no-cache", "--workers", "10000",
                 "--format", "json"]) == 0
    assert "--workers 10000 capped at 8" in capsys.readouterr().err


def test_a_gzip_file_of_two_members_loads(tmp_path):
    import gzip

    from tb_diagnostics.trace import load_trace

    text = json.dumps({"traceEvents": _ops()}).encode()
    half = len(text) // 2
    path = tmp_path / "w.1.pt.trace.json.gz"
    path.write_bytes(gzip.compress(text[:half]) + gzip.compress(text[half:]))
    model = load_trace(str(path))
    assert len(model) == len(_ops())


def test_two_files_of_one_worker_and_timestamp_are_two_spans(tmp_path):
    import gzip

    from tb_diagnostics.logdir import scan_logdir

    run = tmp_path / "log" / "run"
    _write(run / "w.1.pt.trace.json", _ops())
    (run / "w.1.pt.trace.json.gz").write_bytes(
        gzip.compress(json.dumps({"traceEvents": _ops()}).encode()))
    (worker,) = scan_logdir(str(tmp_path / "log")).runs[0].workers
    names = [s.span for s in worker.spans]
    assert names == ["1", "w.1.pt.trace.json.gz"]


def test_a_number_no_float_holds_is_named_in_the_error(tmp_path):
    import pytest

    from tb_diagnostics.errors import TraceLoadError
    from tb_diagnostics.trace import load_trace

    p = tmp_path / "w.1.pt.trace.json"
    p.write_text('{"traceEvents": [{"ph": "X", "name": "a", "ts": 1e400, "dur": 1}]}')
    with pytest.raises(TraceLoadError, match="ts is 1e400, a number no float can hold"):
        load_trace(str(p))


def _gz(path, head: bytes, filler: bytes, mib: int, tail: bytes) -> None:
    import gzip

    with gzip.open(path, "wb", compresslevel=1) as fh:
        fh.write(head)
        for _ in range(mib):
            fh.write(filler * (1 << 20))
        fh.write(tail)


def test_white_space_bombs_stream_in_little_memory_and_zeros_are_refused_at_once(tmp_path):
    """What a hostile gzip expands to is never held whole (bench/run_bombs.py measures it)."""
    import pytest

    from tb_diagnostics.errors import TraceLoadError
    from tb_diagnostics.trace import load_trace, stream

    ev = b'{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":%d,"dur":5}'
    between = tmp_path / "between.pt.trace.json.gz"
    _gz(between, b'{"traceEvents": [' + ev % 1 + b",", b" ", 16, ev % 10 + b"]}")
    held = []
    real = stream._decode_before_last_cut

    def spy(buf, problems, *args, **kwargs):
        held.append(len(buf))
        return real(buf, problems, *args, **kwargs)

    stream._decode_before_last_cut = spy
    try:
        model = load_trace(str(between))
    finally:
        stream._decode_before_last_cut = real
    assert len(model) == 2
    assert max(held) < 1 << 20  # the 16 MiB of spaces were never buffered
    alone = tmp_path / "alone.pt.trace.json.gz"
    _gz(alone, b"", b" ", 16, b"")
    with pytest.raises(TraceLoadError, match="nothing but white space"):
        load_trace(str(alone))
    zeros = tmp_path / "zeros.pt.trace.json.gz"
    _gz(zeros, b"", b"\0", 16, b"")
    with pytest.raises(TraceLoadError, match="starts with byte 0x00"):
        load_trace(str(zeros))


def test_spaces_inside_a_string_are_kept(tmp_path):
    from tb_diagnostics.trace import load_trace

    name = "a" + " " * (600 << 10) + "b"  # spans several 256 KiB blocks
    _write(tmp_path / "w.1.pt.trace.json", [{"ph": "X", "cat": "cpu_op", "name": name,
                                             "pid": 1, "tid": 1, "ts": 1, "dur": 2}])
    model = load_trace(str(tmp_path / "w.1.pt.trace.json"))
    assert model.name_of(0) == name


def test_the_default_size_limit_follows_the_memory_available(tmp_path, monkeypatch):
    import pytest

    from tb_diagnostics.errors import TraceLoadError
    from tb_diagnostics.trace import load_trace, stream

    monkeypatch.delenv("TB_DIAGNOSTICS_MAX_TRACE_MB", raising=False)
    monkeypatch.setattr(stream, "available_memory_bytes", lambda: 1 << 20)
    assert stream.max_trace_bytes() == 2 << 20  # twice what is available
    assert stream.whole_file_limit() == (1 << 20) // 3
    _write(tmp_path / "w.1.pt.trace.json", _ops(40_000))  # about 4 MB of JSON
    with pytest.raises(TraceLoadError, match="larger than the 2 MiB limit"):
        load_trace(str(tmp_path / "w.1.pt.trace.json"))
    monkeypatch.setenv("TB_DIAGNOSTICS_MAX_TRACE_MB", "64")  # an explicit limit wins
    assert len(load_trace(str(tmp_path / "w.1.pt.trace.json"))) == 40_003


def test_a_file_cannot_write_the_loaders_own_notes(tmp_path):
    """The key the stream uses for its counts is not a field a trace can set."""
    from tb_diagnostics.trace import load_trace

    for value in ([1, 2], {"args not an object": 99}, 7):
        _write(tmp_path / "w.1.pt.trace.json", _ops(3), __tb_diagnostics_problems__=value)
        model = load_trace(str(tmp_path / "w.1.pt.trace.json"))
        assert len(model) == 6
        assert not any("normalised" in w for w in model.warnings)
