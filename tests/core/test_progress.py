"""core.progress: the one progress bar and the one estimate rule of long runs."""

from __future__ import annotations

import io

import pytest

from kernelcheck._src.core import progress as P
from kernelcheck.errors import InvalidArgument


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_no_bar_when_the_stream_is_not_a_terminal_or_when_disabled():
    assert not P.progress_bar(10, "x", stream=io.StringIO()).drawn
    assert not P.progress_bar(10, "x", enabled=False, stream=_Tty()).drawn
    assert not P.is_terminal(io.StringIO()) and P.is_terminal(_Tty())


def test_a_bar_on_a_terminal_shows_the_time_left_and_prints_lines_above_it():
    tty, out = _Tty(), io.StringIO()
    with P.progress_bar(4.0, "scaling", stream=tty, unit="s") as bar:
        assert bar.drawn
        bar._bar.delay = 0  # draw at once (a real run waits a second before drawing)
        bar.update(2.0)
        bar._bar.refresh()
        bar.write("a row", file=out)
    drawn = tty.getvalue()
    assert "scaling" in drawn and "50%" in drawn and "<" in drawn  # elapsed<remaining
    assert out.getvalue() == "a row\n"


def test_check_budget_asks_for_yes_past_the_soft_limits_and_refuses_past_the_hard_ones():
    P.check_budget(seconds=10, nbytes=1e6, yes=False, what="run", how="guess")
    with pytest.raises(InvalidArgument, match=r"run would take about 10 min .* pass --yes"):
        P.check_budget(seconds=600, nbytes=1e6, yes=False, what="run", how="g", flag="--yes")
    P.check_budget(seconds=600, nbytes=1e6, yes=True, what="run", how="g")
    with pytest.raises(InvalidArgument, match=r"pass yes=True"):
        P.check_budget(seconds=1, nbytes=P.SOFT_BYTES * 2, yes=False, what="run", how="g")
    with pytest.raises(InvalidArgument, match=r"beyond the limits"):
        P.check_budget(seconds=P.HARD_SECONDS * 2, nbytes=1, yes=True, what="run", how="g")
    with pytest.raises(InvalidArgument, match=r"beyond the limits"):
        P.check_budget(seconds=1, nbytes=P.hard_bytes() * 2, yes=True, what="run", how="g")


def test_formats():
    assert P.fmt_duration(40) == "40 s" and P.fmt_duration(720) == "12 min"
    assert P.fmt_duration(3.5 * 3600) == "3.5 h"
    assert P.fmt_bytes(512 * 1024**2) == "512 MiB" and P.fmt_bytes(10) == "10 B"
