"""The command line's entry: the parser of every command, help, version, and bad usage.

Bad usage must give exit code 2 and exactly one line on stderr that names
the help of the command typed (``see 'kernelcheck psd --help'``), never a
traceback; a mistyped flag, choice or command gets the closest known one.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from kernelcheck import cli
from kernelcheck._src.cli.parser import EPILOG
from tests.cli.commandline import check_usage_error

SUBPROCESS_BAD = {
    "unknown_command": None,
    "missing_file": "psd",
    "malformed_csv": "psd",
    "malformed_expr": "kernel",
    "mistyped_flag": "psd",
}


@pytest.mark.parametrize("name", sorted(SUBPROCESS_BAD))
def test_bad_usage_in_a_subprocess_is_one_line_and_exit_code_2(runs, name):
    proc, expected = runs[name]
    assert expected == 2
    check_usage_error(proc.returncode, proc.stdout, proc.stderr, SUBPROCESS_BAD[name])


def test_bad_usage_messages_say_what_is_wrong(runs):
    msg = {name: runs[name][0].stderr for name in SUBPROCESS_BAD}
    assert "invalid choice: 'frobnicate'" in msg["unknown_command"]
    assert "no such file" in msg["missing_file"] and "absent.npy" in msg["missing_file"]
    assert "cannot read a matrix" in msg["malformed_csv"]
    assert "column 8" in msg["malformed_expr"]
    assert "unrecognized arguments: --tool 1e-9" in msg["mistyped_flag"]
    assert "did you mean '--tol'?" in msg["mistyped_flag"]


def _in_process_bad_usage(f: dict[str, Path]) -> dict[str, list[str]]:
    """More bad usage, run in-process through cli.main (same code path, no start-up cost)."""
    return {
        "no_command": [],
        "unknown_option": ["essay", "--fast"],
        "ragged_txt": ["psd", str(f["ragged_txt"])],
        "nonsquare": ["psd", str(f["nonsquare_npy"])],
        "nan_matrix": ["psd", str(f["nan_csv"])],
        "unknown_suffix": ["psd", str(f["unknown_suffix"])],
        "npz_needs_key": ["psd", str(f["two_npz"])],
        "npz_bad_key": ["psd", str(f["two_npz"]), "--key", "nope"],
        "key_not_npz": ["psd", str(f["pd_npy"]), "--key", "x"],
        "psd_folder": ["psd", str(f["pd_npy"].parent)],
        "unknown_kernel": ["kernel", "tanh(linear)", "--dim", "3"],
        "missing_dim": ["kernel", "linear"],
        "bad_dim": ["kernel", "linear", "--dim", "zero"],
        "negative_dim": ["kernel", "linear", "--dim", "-1"],
        "points_wrong_dim": ["kernel", "linear", "--dim", "2", "--points", str(f["points_txt"])],
        "bad_seed": ["kernel", "linear", "--dim", "2", "--seed", "-3"],
        "bad_budget": ["kernel", "linear", "--dim", "2", "--budget", "0"],
        "bad_form": ["kernel", "linear", "--dim", "2", "--form", "diagonal"],
        "empty_expr": ["kernel", "", "--dim", "2"],
        "number_expr": ["kernel", "2 * 3", "--dim", "2"],
        "nan_tol": ["psd", "x.npy", "--tol", "nan"],
        "essay_bad_claim": ["essay", "--claims", "C99"],
        "essay_bad_claim_list": ["essay", "--claims", "C1,,X"],
        "essay_two_levels": ["essay", "--quick", "--thorough"],
        "essay_out_is_file": ["essay", "--claims", "C7", "--out", str(f["pd_npy"])],
        "unbiased_bad_alpha": ["unbiased", "--alpha", "1.5"],
        "unbiased_zero_alpha": ["unbiased", "--alpha", "0"],
        "unbiased_zero_trials": ["unbiased", "--trials", "0"],
        "unbiased_bad_features": ["unbiased", "--features", "cosine"],
        "scaling_out_is_file": ["scaling", "--out", str(f["pd_npy"])],
        "scaling_bad_sizes": ["scaling", "--sizes", "64,abc"],
        "scaling_two_sizes": ["scaling", "--sizes", "64,128"],
        "scaling_zero_repeats": ["scaling", "--repeats", "0"],
        # softmax at n = 131072: the estimate is far beyond 5 minutes, so --yes is asked for
        "scaling_long_needs_yes": ["scaling", "--sizes", "1024,4096,16384,65536,131072"],
    }


IN_PROCESS_BAD = list(
    _in_process_bad_usage(
        {
            k: Path(k)
            for k in (
                "pd_npy",
                "ragged_txt",
                "nonsquare_npy",
                "nan_csv",
                "unknown_suffix",
                "two_npz",
                "points_txt",
            )
        }
    )
)


@pytest.fixture(scope="module")
def in_process_bad(files):
    return _in_process_bad_usage(files)


@pytest.mark.parametrize("name", IN_PROCESS_BAD)
def test_bad_usage_in_process_is_one_line_naming_the_command_s_help(in_process_bad, name, capsys):
    argv = in_process_bad[name]
    code = cli.main(argv)
    captured = capsys.readouterr()
    command = argv[0] if argv else None
    check_usage_error(code, captured.out, captured.err, command)


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("nonsquare", "not a square matrix"),
        ("nan_matrix", "NaN or Inf"),
        ("npz_needs_key", "--key NAME"),
        ("npz_bad_key", "has no array 'nope'"),
        ("unknown_kernel", "unknown name 'tanh'"),
        ("missing_dim", "--dim"),
        ("essay_bad_claim", "C99"),
        ("points_wrong_dim", "d = 2 columns"),
        ("scaling_two_sizes", "sizes"),
        ("scaling_long_needs_yes", "--yes on the command line"),
    ],
)
def test_in_process_messages_say_what_is_wrong(in_process_bad, name, fragment, capsys):
    cli.main(in_process_bad[name])
    assert fragment in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "command", "suggested"),
    [
        (["esay", "--quick"], None, "essay"),
        (["unbaised"], None, "unbiased"),
        (["unbiased", "--trails", "10"], "unbiased", "--trials"),
        (["unbiased", "--num-featurs=3"], "unbiased", "--num-features"),
        (["essay", "--quik"], "essay", "--quick"),
        (["kernel", "linear", "--dim", "2", "--sede", "1"], "kernel", "--seed"),
        (["unbiased", "--features", "positve"], "unbiased", "positive"),
        (["unbiased", "--features", "trigonometic"], "unbiased", "trigonometric"),
        (["kernel", "linear", "--dim", "2", "--form", "tensr"], "kernel", "tensor"),
        (["psd", "x.npy", "--method", "cholesky2"], "psd", "cholesky"),
        (["kernel", "gausian(lengthscale=2)", "--dim", "2"], "kernel", "gaussian"),
        (["kernel", "exp(linar)", "--dim", "2"], "kernel", "linear"),
    ],
)
def test_a_mistyped_name_gets_the_closest_known_one(argv, command, suggested, capsys):
    code = cli.main(argv)
    captured = capsys.readouterr()
    line = check_usage_error(code, captured.out, captured.err, command)
    assert f"did you mean {suggested!r}?" in line


@pytest.mark.parametrize(
    "argv",
    [["frobnicate"], ["essay", "--fast"], ["unbiased", "--features", "cosine"]],
)
def test_nothing_is_suggested_when_no_known_name_is_close(argv, capsys):
    code = cli.main(argv)
    captured = capsys.readouterr()
    line = check_usage_error(code, captured.out, captured.err, argv[0] if len(argv) > 1 else None)
    assert "did you mean" not in line


def test_help(runs):
    proc, _ = runs["help"]
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: kernelcheck")
    for command in cli.COMMANDS:
        assert command in proc.stdout


@pytest.mark.parametrize("command", cli.COMMANDS)
def test_help_of_each_command(command, capsys):
    assert cli.main([command, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: kernelcheck {command}")
    assert "exit codes: 0 verified, 1 refuted, 2 bad usage, 3 inconclusive" in out
    assert not re.search(r"<the [^>]+>", out), "a placeholder of the help was not filled"


def test_version(capsys):
    import kernelcheck

    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"kernelcheck {kernelcheck.__version__}"


def test_every_option_and_command_has_help():
    parser = cli.build_parser()
    (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert [c.dest for c in sub._choices_actions] == list(cli.COMMANDS)
    for choice in sub._choices_actions:
        assert choice.help, choice.dest
    for name, p in sub.choices.items():
        assert p.description and p.epilog == EPILOG, name
        for action in p._actions:
            if action.help == argparse.SUPPRESS:
                continue
            assert action.help and len(action.help) > 8, (name, action.option_strings)
