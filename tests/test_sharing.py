"""Sharing runs (issue 8): compare, check, export, and a log dir that moved.

Most tests read the sample runs in ``log/`` (made by ``workloads/01_matmul_add.py
--size 64`` and ``--size 2048``); one slow test makes fresh runs with the workload.
"""

from __future__ import annotations

import json
import shutil
import sys
import zipfile
from pathlib import Path

import pytest

from tb_diagnostics.cli import main
from tb_diagnostics.report.compare import check_compare, compare_runs, warm_steps

REPO = Path(__file__).resolve().parents[1]
SMALL, BIG = "matmul_add-size64-cpu", "matmul_add-size2048-cpu"


@pytest.fixture(scope="module")
def samples(tmp_path_factory) -> Path:
    """A log dir with only the two matmul samples (a copy: tests never touch log/)."""
    d = tmp_path_factory.mktemp("samples")
    for run in (SMALL, BIG):
        shutil.copytree(REPO / "log" / run, d / run)
    return d


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TB_DIAGNOSTICS_CACHE", str(tmp_path / "cache"))


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main([*argv, "--workers", "1"])
    out = capsys.readouterr()
    return rc, out.out, out.err


def _step(n: int, wall: float, busy: float = 0.0, verdict: str = "overhead-bound") -> dict:
    return {"step": n, "wall_us": wall, "device_busy_us": busy, "verdict": verdict,
            "flags": []}


def _run(name: str, walls: list[float], findings: list[dict] | None = None) -> dict:
    span = {"span": "1", "file": f"{name}/w.1.pt.trace.json", "steps":
            [_step(i, w) for i, w in enumerate(walls)], "findings": findings or []}
    return {"run": name, "workers": [{"worker": "w", "spans": [span]}]}


def _finding(rule: str, severity: str, steps: list[int]) -> dict:
    return {"rule": rule, "severity": severity, "title": rule, "message": f"{rule} fired",
            "steps": steps, "savings_us": None}


def test_warm_steps_leave_out_the_cold_ones():
    run = _run("a", [900.0, 100.0, 110.0, 120.0], [_finding("cold-start-step", "warning", [0])])
    assert [s["step"] for s in warm_steps(run)] == [1, 2, 3]
    doc = compare_runs(run, _run("b", [50.0, 55.0, 60.0]))
    assert doc["baseline"]["median_warm_wall_us"] == 110.0
    assert doc["baseline"]["cold_steps"] == [0]
    # Matched by position: the baseline's first warm step (1) with the candidate's step 0.
    assert (doc["steps"][0]["baseline_step"], doc["steps"][0]["candidate_step"]) == (1, 0)
    assert doc["findings"]["disappeared"][0]["rule"] == "cold-start-step"


def test_check_gate_both_ways():
    base = _run("a", [100.0, 100.0, 100.0])
    slower = _run("b", [111.0, 111.0, 111.0], [_finding("host-sync", "critical", [1])])
    cmp = compare_runs(base, slower)
    assert cmp["median_warm_wall_change"] == pytest.approx(0.11)
    failed = check_compare(cmp, max_regression=0.10, fail_on="critical")
    assert not failed["ok"] and len(failed["reasons"]) == 2
    assert "regressed 11.0%" in failed["reasons"][0] and "host-sync" in failed["reasons"][1]
    assert check_compare(cmp, max_regression=0.12, fail_on=None)["ok"]
    assert check_compare(cmp, max_regression=0.12, fail_on="warning")["ok"] is False
    assert check_compare(compare_runs(slower, base), max_regression=0.0, fail_on="info")["ok"]


def test_compare_64_vs_2048(samples, capsys):
    rc, out, _ = _cli(capsys, "compare", str(samples), "--baseline", SMALL, "--candidate", BIG,
                      "--format", "json")
    assert rc == 0
    doc = json.loads(out)
    assert doc["baseline"]["verdict"] == "overhead-bound"
    assert doc["candidate"]["verdict"] == "compute-bound" and doc["verdict_changed"]
    assert doc["baseline"]["cold_steps"] == [0]  # size 64's cold first step is left out
    assert doc["median_warm_wall_change"] > 100  # 2048 is >100× slower per step
    assert all(s["verdict_changed"] and s["device_busy_delta_us"] > 0 for s in doc["steps"])
    assert "cold-start-step" in [f["rule"] for f in doc["findings"]["disappeared"]]
    assert doc["ops"][0]["name"] == "aten::mm" and doc["ops"][0]["delta_us"] > 10_000
    assert doc["kernels"] == []  # CPU-only traces launch no kernels
    rc, text, _ = _cli(capsys, "compare", str(samples), "--baseline", SMALL)  # the other run
    assert rc == 0 and "overhead-bound → compute-bound" in text and "aten::mm" in text


def test_compare_across_two_logdirs(samples, tmp_path, capsys):
    other = tmp_path / "other"
    shutil.copytree(samples / BIG, other / BIG)
    rc, out, _ = _cli(capsys, "compare", str(other), "--baseline-logdir", str(samples),
                      "--baseline", SMALL, "--format", "json")
    assert rc == 0
    doc = json.loads(out)
    assert (doc["baseline"]["logdir"], doc["candidate"]["logdir"]) == (str(samples), str(other))


def test_check_exit_codes(samples, tmp_path, capsys):
    args = ("check", str(samples), "--baseline", SMALL, "--candidate", BIG)
    rc, out, _ = _cli(capsys, *args)
    assert rc == 1 and "check FAILED" in out and "median warm step time regressed" in out
    rc, out, _ = _cli(capsys, "check", str(samples), "--baseline", BIG, "--candidate", SMALL)
    assert rc == 0 and "check passed" in out
    # JSON for CI, reusable as the next baseline.
    saved = tmp_path / "check.json"
    rc, _, _ = _cli(capsys, "check", str(samples), "--baseline", BIG, "--candidate", SMALL,
                    "--format", "json", "-o", str(saved))
    doc = json.loads(saved.read_text())
    assert rc == 0 and doc["ok"] and doc["reasons"] == []
    assert doc["report"]["runs"][0]["run"] == SMALL
    rc, _, _ = _cli(capsys, "check", str(samples), "--baseline", str(saved), "--candidate", BIG,
                    "--max-regression", "1000%")
    assert rc == 1  # 2048 is far more than 10× slower than the saved 64 baseline
    rc, _, _ = _cli(capsys, "check", str(samples), "--baseline", str(saved), "--candidate",
                    SMALL)
    assert rc == 0  # the same run against its own saved figures


def test_check_usage_errors(samples, tmp_path, capsys):
    rc, _, err = _cli(capsys, "check", str(samples), "--baseline", "nope", "--candidate", BIG)
    assert rc == 2 and "no run 'nope'" in err
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    rc, _, err = _cli(capsys, "check", str(samples), "--baseline", str(bad), "--candidate", BIG)
    assert rc == 2 and "not a tb-diagnostics report" in err
    rc, _, err = _cli(capsys, "check", str(samples), "--baseline", str(bad))
    assert rc == 2 and "--candidate is needed" in err


def test_export_markdown(samples, tmp_path, capsys):
    out = tmp_path / "r.md"
    rc, _, _ = _cli(capsys, "export", str(samples), "--run", SMALL, "--format", "markdown",
                    "-o", str(out))
    text = out.read_text()
    assert rc == 0 and text.startswith("# tb-diagnostics report")
    assert "**Verdict:** Steps" in text and "| step | wall ms |" in text
    assert "`cold-start-step`" in text and str(samples) not in text


def test_export_html_is_self_contained_and_escaped(tmp_path, capsys, cpu_trace):
    tb = cpu_trace
    tb.step(0, 0, 100)
    tb.op("<script>alert(1)</script>", 10, 60)
    tb.step(1, 100, 100)
    tb.op("<script>alert(1)</script>", 110, 60)
    tb.write(tmp_path / "ld" / "evil" / "w.1.pt.trace.json")
    out = tmp_path / "r.html"
    rc, _, _ = _cli(capsys, "export", str(tmp_path / "ld"), "-o", str(out))
    html = out.read_text()
    assert rc == 0 and "<script" not in html and "&lt;script&gt;" in html
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in html and "<details" in html and "<svg" in html


def _same_report(a: dict, b: dict) -> None:
    a, b = dict(a), dict(b)
    a.pop("logdir"), b.pop("logdir")
    assert a == b


def test_moved_and_zipped_logdir_loads_the_same(samples, tmp_path, capsys):
    """No absolute path, no host state: a copied or unzipped log dir gives the same report."""
    rc, first, _ = _cli(capsys, "report", str(samples), "--run", SMALL, "--format", "json")
    assert rc == 0 and str(samples) not in first.replace(json.loads(first)["logdir"], "")
    moved = tmp_path / "elsewhere" / "deeper"
    shutil.copytree(samples, moved)
    zipped = tmp_path / "logs.zip"
    with zipfile.ZipFile(zipped, "w") as z:
        for p in samples.rglob("*"):
            z.write(p, p.relative_to(samples))
    unzipped = tmp_path / "unzipped"
    zipfile.ZipFile(zipped).extractall(unzipped)
    for where in (moved, unzipped, f"zip://::{zipped}"):
        rc, again, _ = _cli(capsys, "report", str(where), "--run", SMALL, "--format", "json",
                            "--no-cache")
        assert rc == 0, where
        _same_report(json.loads(first), json.loads(again))


@pytest.mark.slow
def test_compare_fresh_workload_runs(tmp_path, capsys):
    """The issue's acceptance: the workload's --size 64 vs --size 2048 runs, made here."""
    sys.path.insert(0, str(REPO / "workloads"))
    import subprocess

    for size in ("64", "2048"):
        subprocess.run([sys.executable, str(REPO / "workloads" / "01_matmul_add.py"),
                        "--size", size, "--device", "cpu", "--sched-active", "3",
                        "--logdir", str(tmp_path / "ld"), "--run", f"s{size}"],
                       check=True, timeout=240, capture_output=True)
    rc, out, _ = _cli(capsys, "compare", str(tmp_path / "ld"), "--baseline", "s64",
                      "--candidate", "s2048", "--format", "json")
    doc = json.loads(out)
    assert rc == 0 and doc["candidate"]["verdict"] == "compute-bound"
    assert doc["median_warm_wall_change"] > 10
    rc, _, _ = _cli(capsys, "check", str(tmp_path / "ld"), "--baseline", "s64",
                    "--candidate", "s2048")
    assert rc == 1
