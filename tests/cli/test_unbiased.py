"""``kernelcheck unbiased``: a run with a report, its estimators, its options, its progress bar."""

from __future__ import annotations

import io
import re
import sys

import pytest

from kernelcheck import cli
from kernelcheck._src.features.random import ESTIMATORS, PositiveRandomFeatures


def test_unbiased_runs(runs, files):
    proc, expected = runs["unbiased"]
    assert proc.returncode == expected, proc.stdout + proc.stderr
    assert (files["unbiased_out"] / "report.json").exists()


def test_extreme_sizes_are_refused_or_decided(capsys):
    assert (
        cli.main(["unbiased", "--dim", "100000", "--num-features", "100000", "--trials", "10"]) == 2
    )
    err = capsys.readouterr().err
    assert "would need 10000000000 entries" in err
    code = cli.main(
        ["unbiased", "--num-points", "1", "--dim", "1", "--num-features", "2", "--trials", "300"]
    )
    assert code in (0, 3)


def test_points_is_a_file_everywhere_and_unbiased_counts_with_num_points(capsys):
    assert cli.main(["unbiased", "--points", "3"]) == 2
    err = capsys.readouterr().err
    assert "--num-points" in err and "file of points" in err
    assert cli.main(["kernel", "--help"]) == 0
    assert "--points FILE" in capsys.readouterr().out


def test_the_estimators_are_the_catalogue_s(capsys):
    assert list(cli.UNBIASED_FEATURES) == list(ESTIMATORS)
    assert cli.main(["unbiased", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert f"the random-feature estimator: {', '.join(ESTIMATORS)} (default" in help_text


def test_an_estimator_added_to_the_catalogue_is_a_choice_at_once(monkeypatch, capsys):
    monkeypatch.setitem(ESTIMATORS, "positive-again", PositiveRandomFeatures)
    assert "positive-again" in cli.UNBIASED_FEATURES
    argv = ["unbiased", "--features", "positive-again", "--trials", "300", "--dim", "2"]
    assert cli.main([*argv, "--num-features", "4"]) in (0, 3)
    assert capsys.readouterr().err == ""
    assert cli.main(["unbiased", "--help"]) == 0
    assert "positive-again" in capsys.readouterr().out


class _Terminal(io.StringIO):
    """A standard error that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def terminal(monkeypatch):
    """A terminal as standard error, with progress bars drawn at every update.

    tqdm's delays are removed, so a short run draws its bar.  The terminal is
    put in place when the test calls it: pytest's own capture sets
    ``sys.stderr`` again when the test starts, after the fixtures.
    """
    import tqdm.auto

    real = tqdm.auto.tqdm

    class Eager(real):  # type: ignore[misc, valid-type]
        def __init__(self, *args, **kwargs):
            kwargs.update(delay=0, mininterval=0)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(tqdm.auto, "tqdm", Eager)

    def attach() -> _Terminal:
        screen = _Terminal()
        monkeypatch.setattr(sys, "stderr", screen)
        return screen

    return attach


#: A bar with the time elapsed and an estimate of the time left: ``[00:01<00:03, ...]``.
ESTIMATE = re.compile(r"\[\d\d:\d\d<\d\d:\d\d")


def test_a_run_on_a_terminal_shows_progress_with_the_time_left(terminal):
    screen = terminal()
    argv = ["unbiased", "--trials", "4000", "--dim", "2", "--num-features", "4"]
    assert cli.main(argv) in (0, 3)
    drawn = screen.getvalue()
    assert "unbiased" in drawn and "trial" in drawn, drawn
    assert ESTIMATE.search(drawn), drawn


def test_quiet_draws_no_bar(terminal):
    screen = terminal()
    argv = ["unbiased", "--trials", "4000", "--dim", "2", "--num-features", "4", "--quiet"]
    assert cli.main(argv) in (0, 3)
    assert screen.getvalue() == ""
