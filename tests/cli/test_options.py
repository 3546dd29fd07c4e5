"""The options several commands share: ``--out``, ``--scheduler`` / ``--workers``, checked first.

An output folder that cannot be written into, or a scheduler address that is
malformed or silent, is refused before any work: exit code 2 and one line
on stderr naming the problem and the command's help.  ``--workers`` gives the
same report as an in-process run for the same seed.
"""

from __future__ import annotations

import json

import pytest

from kernelcheck import cli
from tests.cli.commandline import check_usage_error, run_kernelcheck

#: id -> (argv, what stderr's one line says)
ROWS = {
    "essay-out-under-a-file": (["essay", "--quick", "--out", "afile/sub"], "is not a folder"),
    "unbiased-out-dangling": (["unbiased", "--out", "dangling"], "dangling link"),
    "scaling-out-proc": (["scaling", "--out", "/proc/kernelcheck"], "cannot write into"),
    "essay-out-empty": (["essay", "--quick", "--out", ""], "must be a folder path"),
    "scheduler-not-a-url": (
        ["essay", "--quick", "--claims", "C1", "--scheduler", "not a url"],
        "must be a scheduler address",
    ),
    "scheduler-silent": (
        ["essay", "--quick", "--claims", "C1", "--scheduler", "tcp://127.0.0.1:1"],
        "no Dask scheduler answers",
    ),
    "timeout-zero": (["psd", "m.npy", "--timeout", "0"], "positive number of seconds"),
}


@pytest.mark.parametrize("name", sorted(ROWS))
def test_a_bad_shared_option_is_refused_first_with_one_line(name, place, capsys):
    argv, says = ROWS[name]
    code = cli.main(argv)
    captured = capsys.readouterr()
    line = check_usage_error(code, captured.out, captured.err, argv[0])
    assert says in line
    assert not (place / "afile").is_dir()


def test_unbiased_on_a_local_dask_cluster_equals_the_local_report(tmp_path):
    pytest.importorskip("distributed")
    common = ("unbiased", "--trials", "4000", "--seed", "3", "--json")
    local = run_kernelcheck(common, tmp_path)
    dask = run_kernelcheck((*common, "--workers", "2"), tmp_path)
    assert local.returncode == dask.returncode == 0, dask.stderr[-2000:]
    assert json.loads(local.stdout) == json.loads(dask.stdout)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["unbiased", "--workers", "0"], "--workers"),
        (["unbiased", "--workers", "2", "--scheduler", "tcp://127.0.0.1:1"], "not allowed with"),
        (["essay", "--workers", "x"], "--workers"),
    ],
)
def test_bad_dask_options_are_usage_errors(argv, message, capsys):
    code = cli.main(argv)
    captured = capsys.readouterr()
    line = check_usage_error(code, captured.out, captured.err, argv[0])
    assert message in line
