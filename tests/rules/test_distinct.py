"""rules.distinct: findings that share a title are told apart by their subject."""

from __future__ import annotations

from tb_diagnostics.rules import Evidence, Finding, distinct


def _finding(subject=None, ev_name="aten::add"):
    ev = Evidence(row=1, name=ev_name, category="op", ts=0.0, dur=1.0, lane="thread 1",
                  correlation=None, external_id=None)
    return Finding(rule="r", severity="info", title="Same title", message="m", steps=[1],
                   evidence=[ev], savings_us=None, confirm="c", subject=subject)


def test_a_lone_finding_keeps_no_subject():
    (f,) = distinct([_finding()])
    assert f.subject is None


def test_repeated_titles_without_subjects_take_their_evidence_name():
    a, b = distinct([_finding(ev_name="aten::mul"), _finding(ev_name="aten::add")])
    assert (a.subject, b.subject) == ("aten::mul", "aten::add")


def test_same_subjects_are_numbered():
    a, b = distinct([_finding("x"), _finding("x")])
    assert (a.subject, b.subject) == ("x", "x (2)")


def test_distinct_subjects_are_kept():
    a, b = distinct([_finding("x"), _finding("y")])
    assert (a.subject, b.subject) == ("x", "y")


def test_findings_with_neither_subject_nor_evidence_are_all_numbered():
    from dataclasses import replace

    a, b = distinct([replace(_finding(), evidence=[]), replace(_finding(), evidence=[])])
    assert (a.subject, b.subject) == ("#1", "#2")
