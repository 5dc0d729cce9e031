"""The `tb-diagnostics` command: formats, the JSON contract, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import TraceBuilder
from tb_diagnostics.cli import main

STEP_KEYS = {"step", "start_us", "host_start_us", "host_end_us", "wall_us", "device_busy_us",
             "device_busy", "compute_busy_us", "compute_busy", "exposed_collective_us", "idle",
             "verdict", "main_idle_cause", "self_cpu_us", "self_device_us",
             "ops", "kernels", "flags", "comm_us", "exposed_comm_us", "overlap",
             "flops", "achieved_tflops", "flop_utilisation", "flop_precision",
             "busy_compute_bound_us", "busy_memory_bound_us", "busy_unmodelled_us", "cold"}
SPAN_KEYS = {"span", "file", "device", "verdict", "verdict_split", "steps", "findings",
             "notes", "errors", "distributed", "roofline", "whatif"}
# The launch queue per step (views.backlog) and activity coverage per span.
STEP_KEYS |= {"backlog_start", "backlog_end", "backlog_start_us", "backlog_end_us",
              "backlog_trend", "launch_queue_us", "host_period_us", "device_work_us",
              "host_limited", "host_blocked_us"}
SPAN_KEYS |= {"activity_complete"}
# What decided a verdict where compute_busy did not; the coverage counts.
STEP_KEYS |= {"verdict_reason"}
SPAN_KEYS |= {"activity_coverage"}
STEP_KEYS |= {"critical_path"}  # issue 27: what the step's end waits on
STEP_KEYS |= {"stub"}  # issue 29: the profiler's empty trailing step
STEP_KEYS |= {"idle_host_work_us", "host_work"}  # the launch cause's host work
STEP_KEYS |= {"flag_why"}  # why a step is flagged (analysis.views.step_flags)
WHATIF_KEYS = {"id", "change", "rules", "assumes", "steps", "saves_us", "saves_us_total",
               "per_step", "related", "parts",  # issue 23: related rules, findings' parts
               # issue 25: what moves to other steps; the step the bars draw, named
               "moves_us", "saving_moves", "shown_step", "shown_before_us", "shown_after_us",
               "path_segments"}  # issue 27: what it takes off the steps' critical paths
ROOFLINE_KEYS = {"device", "shapes_recorded", "ops", "ops_total", "modelled_device_us",
                 "unmodelled", "unmodelled_device_us", "notes",
                 "host_link", "communication",  # issue 24: the host link, collectives
                 "lower_bound_device_us"}  # issue 24: custom ops with only a memory bound


@pytest.fixture
def logdir(tmp_path):
    t = TraceBuilder(device_properties=[{"id": 0, "name": "Test GPU"}])
    t.step(1, 0, 100)
    t.op("aten::add", 10, 50)
    t.launch(20, 5, "k", 30, 20)
    t.step(2, 100, 100)
    t.launch(110, 5, "k", 120, 85)
    t.write(tmp_path / "logs" / "runA" / "worker0.5.pt.trace.json.gz", gz=True)
    t.write(tmp_path / "logs" / "runB" / "rank1.pt.trace.json")
    return tmp_path / "logs"


def test_json_report_follows_the_documented_schema(logdir, capsys):
    assert main(["report", str(logdir), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["run"] for r in doc["runs"]] == ["runA", "runB"]
    span = doc["runs"][0]["workers"][0]["spans"][0]
    assert doc["runs"][0]["workers"][0]["worker"] == "worker0"
    assert set(span) == SPAN_KEYS
    assert span["span"] == "5" and span["file"] == "runA/worker0.5.pt.trace.json.gz"
    assert span["device"] == {"kind": "cuda", "name": "Test GPU"}
    assert [set(s) for s in span["steps"]] == [STEP_KEYS, STEP_KEYS]
    assert set(span["steps"][0]["idle"]) == {"input_us", "sync_us", "launch_us", "other_us",
                                            "profiler_us", "comm_us", "compile_us",
                                            "module_load_us"}
    assert [s["verdict"] for s in span["steps"]] == ["overhead-bound", "compute-bound"]
    assert isinstance(span["findings"], list)
    assert set(span["roofline"]) == ROOFLINE_KEYS
    # "Test GPU" is in no peak table: its roofline says so, with every peak null.
    assert span["roofline"]["device"] == {
        "name": "Test GPU", "source": None,
        "peaks": dict.fromkeys(("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp6", "fp4",
                                "int8", "hbm_gbps")),
        # Issue 24: how the device was identified, here why it was not.
        "identified_by": None,
        "identification": "'Test GPU' matches no row of the peaks table, and only NVIDIA "
                          "parts are identified by their properties"}
    assert any("no peak figures for Test GPU" in n for n in span["roofline"]["notes"])
    assert isinstance(span["whatif"], list)
    assert all(set(w) == WHATIF_KEYS for w in span["whatif"])


def test_json_indent_choices_write_the_same_document(logdir, capsys):
    texts = {}
    for indent in ("auto", "0", "2"):
        assert main(["report", str(logdir), "--format", "json", "--indent", indent]) == 0
        texts[indent] = capsys.readouterr().out
    assert texts["auto"] == texts["2"]  # two steps: indented
    assert texts["0"].count("\n") == 1 and texts["2"].count("\n") > 100
    assert json.loads(texts["0"]) == json.loads(texts["2"])


def test_run_filter_and_unknown_run(logdir, capsys):
    assert main(["report", str(logdir), "--run", "runB", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["run"] for r in doc["runs"]] == ["runB"]
    assert main(["report", str(logdir), "--run", "nope"]) == 2
    err = capsys.readouterr().err
    assert "no run 'nope'" in err and "runA, runB" in err


def test_text_report_has_a_step_table_and_headline(logdir, capsys):
    assert main(["report", str(logdir), "--run", "runA"]) == 0
    out = capsys.readouterr().out
    assert "run runA · worker worker0 · span 5 (cuda: Test GPU)" in out
    # The span is what most of its warm time is: step 2's 105 µs outweigh step 1's 100 µs.
    assert ("verdict: Step 2 is compute-bound (1 compute-bound step takes 105 µs of 205 µs; "
            "1 overhead-bound, step 1, takes 100 µs): the GPU is busy") in out
    assert "#1" in out and "#2" in out and "compute-bound" in out


def test_markdown_report(logdir, capsys):
    assert main(["report", str(logdir), "--format", "markdown", "--run", "runA"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# tb-diagnostics report")
    assert "| step | wall ms | busy | verdict |" in out


def test_thresholds_from_the_command_line(logdir, capsys):
    main(["report", str(logdir), "--run", "runA", "--format", "json", "--compute-bound", "95%"])
    steps = json.loads(capsys.readouterr().out)["runs"][0]["workers"][0]["spans"][0]["steps"]
    assert steps[1]["verdict"] == "mixed"
    assert main(["report", str(logdir), "--low-busy", "0.9", "--compute-bound", "0.5"]) == 2
    assert "thresholds must satisfy" in capsys.readouterr().err


def test_exit_codes(tmp_path, capsys):
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert "does not exist" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["report"])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        main(["report", str(tmp_path), "--format", "yaml"])
    assert e.value.code == 2
    # An empty log dir is not an error: there is nothing to say yet.
    assert main(["report", str(tmp_path)]) == 0
    assert "No PyTorch profiler traces" in capsys.readouterr().out
    # Only unreadable traces: the report says why, and the exit code says nothing was read.
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "w.1.pt.trace.json").write_text("{")
    assert main(["report", str(tmp_path)]) == 1
    assert "r/w.1.pt.trace.json: truncated JSON" in capsys.readouterr().out


def test_console_script_runs_as_a_module(logdir):
    out = subprocess.run([sys.executable, "-m", "tb_diagnostics.cli", "report", str(logdir),
                          "--format", "json", "-o", str(logdir.parent / "r.json")],
                         capture_output=True, text=True, check=True)
    assert out.stdout == ""
    assert json.loads((logdir.parent / "r.json").read_text())["runs"]
