"""Deadlines of user calls (kernelcheck._src.core.deadline): they hold for any finite timeout.

A deadline is an instant of ``time.monotonic()``; waiting for it hands the
event a slice of at most ``WAIT_SLICE`` seconds at a time, because
``threading.Event.wait(t)`` raises ``OverflowError`` for a ``t`` whose
absolute time the platform cannot represent (``t = 1e10`` on Linux).
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from kernelcheck._src.core import waits as waits_module
from kernelcheck._src.core.deadline import as_timeout, run_user, user_deadline
from kernelcheck._src.core.waits import WAIT_SLICE, wait_for
from kernelcheck.errors import InvalidArgument

#: Timeouts beyond what ``Event.wait`` takes in one call, and the largest float.
HUGE = [1e10, 1e300, float(np.finfo(np.float64).max)]


def _slow(value, seconds=0.05):
    """A callable still running when its caller starts to wait (so the wait is really made)."""

    def call():
        time.sleep(seconds)
        return value

    return call


def test_the_platform_refuses_a_long_wait_in_one_call():
    """What the slices are for: a plain ``Event.wait(1e10)`` overflows here."""
    with pytest.raises(OverflowError):
        threading.Event().wait(max(1e10, 2 * threading.TIMEOUT_MAX))


@pytest.mark.parametrize("timeout", HUGE)
def test_a_user_call_under_a_huge_timeout_returns_its_value(timeout):
    with user_deadline(timeout):
        assert run_user(_slow(7), "`f`") == 7


@pytest.mark.parametrize("timeout", HUGE)
def test_wait_for_a_huge_time_returns_when_the_event_is_set(timeout):
    event = threading.Event()
    timer = threading.Timer(0.05, event.set)
    timer.start()
    try:
        assert wait_for(event, timeout) is True
    finally:
        timer.cancel()


def test_a_short_deadline_still_abandons_a_stuck_call():
    release = threading.Event()
    start = time.monotonic()
    try:
        with pytest.raises(InvalidArgument, match=r"^`f` did not return within timeout=0.2 s"):
            with user_deadline(0.2):
                run_user(lambda: release.wait(30), "`f`")
    finally:
        release.set()
    assert time.monotonic() - start < 5.0


def test_a_deadline_longer_than_one_slice_is_waited_for_in_slices(monkeypatch):
    """With slices of 0.05 s, a 0.3 s deadline takes several waits and ends on time."""
    monkeypatch.setattr(waits_module, "WAIT_SLICE", 0.05)
    waits = []
    real_wait = threading.Event.wait

    class Counting(threading.Event):
        def wait(self, timeout=None):
            waits.append(timeout)
            return real_wait(self, timeout)

    start = time.monotonic()
    assert waits_module.wait_until(Counting(), time.monotonic() + 0.3) is False
    assert 0.3 <= time.monotonic() - start < 3.0
    assert len(waits) >= 5 and max(waits) <= 0.05


def test_the_slice_is_one_the_platform_can_wait_for():
    assert 0 < WAIT_SLICE <= threading.TIMEOUT_MAX
    event = threading.Event()
    event.set()
    assert event.wait(WAIT_SLICE) is True


def test_a_thread_that_cannot_start_is_not_blamed_on_the_callable(monkeypatch):
    def refuse(self):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    with pytest.raises(InvalidArgument, match=r"^`timeout`: no thread could be started to run `f`"):
        with user_deadline(5.0):
            run_user(lambda: 1, "`f`")


@pytest.mark.parametrize(
    "bad, message",
    [
        (float("inf"), "`timeout` must be finite, got inf"),
        (-float("inf"), "`timeout` must be finite, got -inf"),
        (float("nan"), "`timeout` must be finite, got nan"),
        (-1.0, "`timeout` must be > 0, got -1.0"),
        (0, "`timeout` must be > 0, got 0.0"),
        ("60", "`timeout` must be a real number"),
        (True, "`timeout` must be a real number"),
    ],
)
def test_a_timeout_that_is_not_a_positive_finite_number_is_refused(bad, message):
    with pytest.raises(InvalidArgument, match=f"^{message}"):
        as_timeout(bad)


def test_the_largest_finite_timeout_is_accepted():
    assert as_timeout(HUGE[-1]) == HUGE[-1]
