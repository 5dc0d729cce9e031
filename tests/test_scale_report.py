"""bench/scale_report.py: issue 28's targets checked on measured rows, and the Markdown tables
that the README's scale section pastes. Pure functions on made-up figures; nothing is run."""

from __future__ import annotations

import sys

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))

import scale_report as sr


def _m(seconds: float, rss: float = 100.0) -> dict:
    return {"seconds": seconds, "cpu_s": seconds, "rss_mb": rss, "tree_rss_mb": rss}


def _row(kind: str, nominal: int, mb: float, seconds: float, rss: float,
         orjson: float, steps: int = 10) -> dict:
    return {"kind": kind, "nominal_mb": nominal, "mb": mb, "steps": steps,
            "orjson": _m(orjson, 8 * mb), "after": {"report": _m(seconds, rss)}}


@pytest.fixture
def rows() -> list[dict]:
    # deep: linear within 1.10×, fast, lean; large: slow at 2 GB, superlinear, fat at 500 MB.
    return [_row("deep", 50, 51.0, 0.8, 55.0, 1.2),
            _row("deep", 500, 513.0, 3.5, 229.0, 11.9),
            _row("deep", 2000, 2057.0, 15.4 * 0.7, 783.0, 58.8),
            _row("large", 500, 495.0, 5.0, 300.0, 12.0),
            _row("large", 2000, 1989.0, 30.0, 574.0, 50.0)]


class _By:
    """Target lines by kind and the start of the target's text (exactly one must match)."""

    def __init__(self, lines: list[sr.TargetLine]) -> None:
        self.lines = lines

    def __getitem__(self, key: tuple[str, str]) -> sr.TargetLine:
        (hit,) = [t for t in self.lines if t.kind == key[0] and t.target.startswith(key[1])]
        return hit

    def values(self) -> list[sr.TargetLine]:
        return self.lines


def _by(lines: list[sr.TargetLine]) -> _By:
    return _By(lines)


def test_targets_pass_and_miss_from_the_figures(rows):
    steps = [{"steps": 10**6, "mb": 534.0, "after": _m(18.0, 1600.0)}]
    got = _by(sr.check_targets(rows, steps, ["deep", "large"]))
    assert got["deep", "2 GB ready"].status == "PASS"  # 10.78 s
    assert got["deep", "2 GB ready"].measured == "10.78 s (2057 MB)"
    assert got["large", "2 GB ready"].status == "MISS"
    growth_deep = (10.78 / 3.5) / (2057 / 513)
    assert got["deep", "500 MB → 2 GB"].measured == f"{growth_deep:.2f}×"
    assert got["deep", "500 MB → 2 GB"].status == "PASS"
    assert got["large", "500 MB → 2 GB"].status == "MISS"  # (30/5)/(1989/495) = 1.49
    assert got["deep", "500 MB ≤"].status == "PASS"  # 3.5 / 11.9 = 0.29
    assert got["large", "500 MB ≤"].measured == "0.42×"
    assert got["large", "500 MB ≤"].status == "MISS"
    # RSS: the worst ratio from 500 MB on (50 MB's 1.08 does not count).
    assert got["deep", "peak RSS"].measured == "0.45× at 513 MB"
    assert got["deep", "peak RSS"].status == "PASS"
    assert got["large", "peak RSS"].measured == "0.61× at 495 MB"
    assert got["large", "peak RSS"].status == "MISS"
    assert got["span", "10⁶-step span ≤ 20 s"].status == "PASS"  # 18 s
    rss_line = got["span", "10⁶-step span ≤ 1.5 GB"]
    assert (rss_line.measured, rss_line.status) == ("1600 MB", "MISS")


def test_failed_runs_miss_and_unmeasured_targets_are_not_judged(rows):
    rows[2]["after"]["report"] = {"error": "timeout", "seconds": 600.0}
    steps = [{"steps": 10**6, "mb": 534.0, "after": {"error": "timeout", "seconds": 600.0}}]
    got = _by(sr.check_targets(rows, steps, ["deep", "large"]))
    assert got["deep", "2 GB ready"].measured == "timeout (600 s)"
    assert got["deep", "2 GB ready"].status == "MISS"
    assert got["deep", "500 MB → 2 GB"].status == "MISS"
    assert got["deep", "peak RSS"].status == "MISS"  # one big run has no figure
    assert got["span", "10⁶-step span ≤ 20 s"].measured == "timeout (600 s)"
    assert got["span", "10⁶-step span ≤ 1.5 GB"].status == "MISS"
    only_50 = _by(sr.check_targets(rows[:1], [], ["deep"]))
    assert {t.status for t in only_50.values()} == {"—"}
    assert {t.measured for t in only_50.values()} == {"not run"}


def _cells(line: str) -> list[str]:
    assert line.startswith("| ") and line.endswith(" |"), line
    return line[2:-2].split(" | ")


def test_tables_are_markdown_with_one_row_per_measurement(rows):
    text = sr.sizes_table(rows, ["after"])
    head, rule, *body = text.splitlines()
    width = len(_cells(head))
    assert all(len(_cells(x)) == width for x in (rule, *body))
    assert set(_cells(rule)) <= {"---", "--:"}
    assert len(body) == len(rows)
    deep_500 = dict(zip(_cells(head), _cells(body[1]), strict=True))
    assert deep_500["ms per MB"] == f"{1000 * 3.5 / 513:.1f}"
    assert deep_500["RSS / file"] == f"{229 / 513:.2f}"
    assert deep_500["report / orjson"] == f"{3.5 / 11.9:.2f}"
    assert deep_500["`orjson.loads`, whole process"] == "11.90 s, 4.1 GB"
    # With a before/after pair, a code column and one row per variant.
    for r in rows:
        r["before"] = {"report": _m(2 * r["after"]["report"]["seconds"])}
    two = sr.sizes_table(rows, ["before", "after"]).splitlines()
    assert "code" in _cells(two[0]) and len(two) == 2 + 2 * len(rows)


def test_render_holds_every_part():
    rows = [_row("deep", 50, 51.0, 0.8, 55.0, 1.2), _row("deep", 500, 513.0, 3.5, 229.0, 11.9)]
    result = {"when": "2026-12-02 04:00 UTC", "command": "python bench/run_scale.py",
              "machine": "x86_64, 2 cores", "python": "3.11", "orjson": "3.13.0",
              "load_before": "0.1/0.1/0.1", "load_after": "0.2/0.1/0.1", "repeat": 3,
              "kinds": ["deep"], "variants": ["after"], "rows": rows,
              "step_rows": [{"steps": 10**6, "mb": 534.0, "after": _m(18.0, 900.0)}]}
    text = sr.render(result)
    assert "from 51 to 513 MB, time grows" in text
    assert "| 1,000,000 steps | 534 MB | 18.00 s |" in text
    assert "| 10⁶-step span ≤ 20 s | GPU span, `gen_steps.py` | 18.00 s | **PASS** |" in text
    assert "orjson 3.13.0" in text


def test_an_orjson_run_left_out_reads_not_timed() -> None:
    # run_scale.py --orjson-max-mb 500: the 2 GB rows have no orjson figure, and say so.
    row = _row("deep", 2000, 2000.0, 11.0, 700.0, orjson=100.0)
    row["orjson"] = {"error": sr.NOT_TIMED}
    assert sr.failure(row["orjson"]) == "not timed"
    assert sr.orjson_ratio(row, "after") is None
    assert "| not timed | — |" in sr.sizes_table([row], ["after"])
