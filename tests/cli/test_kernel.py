"""``kernelcheck kernel EXPR --dim d``: exit codes, points, JSON, the names of the catalogue."""

from __future__ import annotations

import inspect
import json

import numpy as np
import pytest

from kernelcheck import cli
from kernelcheck._src.kernels.catalog import LEAVES, REQUIRED
from tests.cli.commandline import check_usage_error


@pytest.mark.parametrize("name", ["kernel_ok", "kernel_refuted"])
def test_kernel_exit_codes(runs, name):
    proc, expected = runs[name]
    assert proc.returncode == expected, proc.stdout + proc.stderr


def test_kernel_with_points_in_process(files, capsys):
    argv = [
        "kernel",
        "gaussian(lengthscale=2) * laplacian",
        "--dim",
        "3",
        "--points",
        str(files["points_txt"]),
    ]
    assert cli.main(argv) == 0
    assert "Gaussian(lengthscale=2.0) * Laplacian()" in capsys.readouterr().out


def test_kernel_json_reports_features(runs):
    proc, _ = runs["kernel_ok"]
    payload = json.loads(proc.stdout)
    from kernelcheck._src.kernels.expr import parse_kernel

    result = payload["result"]
    k = parse_kernel(result["expression"])
    assert result["kernel"] == repr(k)
    assert result["feature_dim"] == k.feature_dim(2)
    assert result["feature_map_report"]["passed"] is True
    assert payload["outcome"] == "verified" and payload["exit_code"] == proc.returncode == 0


def test_points_beyond_the_float_range_cannot_decide(tmp_path, capsys):
    pts = tmp_path / "p.txt"
    np.savetxt(pts, np.array([[1e200, 0.0], [0.0, 1.0]]))
    assert cli.main(["kernel", "exponential", "--dim", "2", "--points", str(pts)]) == 3
    err = capsys.readouterr().err
    assert err.startswith("kernelcheck kernel: cannot decide: ") and err.count("\n") == 1


def test_an_expression_starting_with_a_minus_is_an_expression(capsys):
    assert cli.main(["kernel", "-linear", "--dim", "2"]) == 1  # refuted: -x.y is no kernel
    assert "(-1.0) * Linear()" in capsys.readouterr().out


def test_kernel_help_states_the_library_s_search_budget(capsys):
    from kernelcheck import verify

    budget = inspect.signature(verify.kernel).parameters["budget"].default
    assert cli.main(["kernel", "--help"]) == 0
    assert f"counterexample search (default {budget})" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("leaf", LEAVES, ids=[leaf.name for leaf in LEAVES])
def test_the_names_of_the_command_line_are_the_catalogue_s(leaf, capsys):
    """Each spelling of each catalogue leaf parses on the command line, and a typo of it
    (its third letter dropped) is answered with that spelling."""
    args = ", ".join(str(next(iter(p.draws))) for p in leaf.params if p.default is REQUIRED)
    for spelling in leaf.spellings:
        code = cli.main(["kernel", f"{spelling}({args})", "--dim", "1", "--budget", "1"])
        captured = capsys.readouterr()
        assert code in (0, 1, 3), captured.err
        if len(spelling) < 5:  # too short to tell a typo from another name (rbf, poly)
            continue
        typo = spelling[:2] + spelling[3:]
        code = cli.main(["kernel", f"{typo}({args})", "--dim", "1"])
        captured = capsys.readouterr()
        line = check_usage_error(code, captured.out, captured.err, "kernel")
        assert f"unknown name {typo!r}; did you mean {spelling!r}?" in line
