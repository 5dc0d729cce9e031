"""Reads run ahead in the helper (BoundedCalls.ahead): the answers in order, none left
for a later call when the caller stops early, a stalled one given up after the timeout."""

from __future__ import annotations

import threading
import time

import pytest

from tb_diagnostics.trace.source import BoundedCalls, ReadStalled


def _echo(x: int) -> int:
    return x * 10


@pytest.mark.parametrize("timeout", [5.0, None])
def test_answers_come_in_order(timeout):
    calls = BoundedCalls(timeout)
    try:
        assert list(calls.ahead(_echo, [(i,) for i in range(50)], depth=4)) == \
            [i * 10 for i in range(50)]
        assert list(calls.ahead(_echo, [])) == []
    finally:
        calls.close()


def test_a_caller_that_stops_early_leaves_no_answer_behind():
    calls = BoundedCalls(5.0)
    try:
        it = calls.ahead(_echo, [(i,) for i in range(20)], depth=6)
        assert [next(it), next(it)] == [0, 10]
        it.close()
        assert calls.call(_echo, 7) == 70  # its own answer, not one of the six ahead
    finally:
        calls.close()


def test_an_error_in_a_call_reaches_the_caller_and_the_rest_are_waited_out():
    def boom(x: int) -> int:
        if x == 3:
            raise OSError("bad block")
        return x

    calls = BoundedCalls(5.0)
    try:
        got = []
        with pytest.raises(OSError, match="bad block"):
            for v in calls.ahead(boom, [(i,) for i in range(10)], depth=4):
                got.append(v)
        assert got == [0, 1, 2]
        assert calls.call(_echo, 1) == 10
    finally:
        calls.close()


def test_a_stalled_call_gives_up_after_the_timeout():
    release = threading.Event()

    def stuck(x: int) -> int:
        if x == 2:
            release.wait(10)
        return x

    calls = BoundedCalls(0.3)
    try:
        t0 = time.monotonic()
        got = []
        with pytest.raises(ReadStalled):
            for v in calls.ahead(stuck, [(i,) for i in range(6)], depth=3):
                got.append(v)
        assert got == [0, 1] and time.monotonic() - t0 < 5
        with pytest.raises(ReadStalled):  # the helper is still stuck: no second wait
            calls.call(_echo, 1)
    finally:
        release.set()
        calls.close()
