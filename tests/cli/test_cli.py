"""The ``kernelcheck`` command line, run as a subprocess (``python -m kernelcheck``).

Every subcommand runs once for real and once with bad usage.  Bad usage must
give exit code 2 and exactly one line on stderr, never a traceback.  The
subprocesses start together from one module fixture (each pays the package
import), so the file stays fast on two cores; a longer table of bad argument
values runs in-process through :func:`kernelcheck.cli.main`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from kernelcheck import cli
from kernelcheck._src.core.atomic import InterruptedAfterWrite

TIMEOUT = 240


def _run(argv, cwd):
    env = dict(os.environ, PYTHONWARNINGS="ignore", COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-m", "kernelcheck", *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("matrices")
    X = np.random.default_rng(0).normal(size=(6, 3))
    pd_matrix = X @ X.T + np.eye(6)  # Gram of linear features plus I: positive definite
    not_psd = np.array([[1.0, 2.0], [2.0, 1.0]])  # eigenvalues 3 and -1
    paths = {
        "pd_npy": d / "pd.npy",
        "notpsd_csv": d / "notpsd.csv",
        "pd_txt": d / "pd.txt",
        "two_npz": d / "two.npz",
        "malformed_csv": d / "malformed.csv",
        "ragged_txt": d / "ragged.txt",
        "nonsquare_npy": d / "nonsquare.npy",
        "nan_csv": d / "nan.csv",
        "unknown_suffix": d / "matrix.dat",
        "points_txt": d / "points.txt",
        "essay_out": d / "essay_out",
        "scaling_out": d / "scaling_out",
        "unbiased_out": d / "unbiased_out",
    }
    np.save(paths["pd_npy"], pd_matrix)
    np.savetxt(paths["notpsd_csv"], not_psd, delimiter=",")
    np.savetxt(paths["pd_txt"], pd_matrix, header="a positive definite matrix")
    np.savez(paths["two_npz"], pd=pd_matrix, notpsd=not_psd)
    paths["malformed_csv"].write_text("1,2\nthree,4\n")
    paths["ragged_txt"].write_text("1 2 3\n4 5\n")
    np.save(paths["nonsquare_npy"], np.ones((2, 3)))
    paths["nan_csv"].write_text("1,nan\nnan,1\n")
    paths["unknown_suffix"].write_text("1 0\n0 1\n")
    np.savetxt(paths["points_txt"], X)
    return paths


def _subprocess_cases(f: dict[str, Path]) -> dict[str, tuple[list[str], int | None]]:
    """Run as real subprocesses: one happy path per subcommand, the issue's bad usages."""
    return {
        "help": (["--help"], 0),
        "essay": (
            ["essay", "--quick", "--claims", "C1,C7,C8,C12", "--out", str(f["essay_out"])],
            0,
        ),
        "essay_json": (["essay", "--quick", "--claims", "C7,C8", "--json"], 0),
        "psd_npy": (["psd", str(f["pd_npy"])], 0),
        "psd_csv_refuted": (["psd", str(f["notpsd_csv"]), "--json"], 1),
        "kernel_ok": (
            [
                "kernel",
                "exp(linear, order=2) + 0.5*poly(2)",
                "--dim",
                "2",
                "--budget",
                "4",
                "--json",
            ],
            0,
        ),
        "kernel_refuted": (["kernel", "linear - 0.5*poly(2)", "--dim", "2", "--budget", "4"], 1),
        "unbiased": (
            [
                "unbiased",
                "--trials",
                "4000",
                "--num-features",
                "16",
                "--dim",
                "2",
                "--out",
                str(f["unbiased_out"]),
            ],
            0,
        ),
        "scaling": (
            [
                "scaling",
                "--sizes",
                "64,128,256",
                "--repeats",
                "1",
                "--json",
                "--out",
                str(f["scaling_out"]),
            ],
            None,  # a timing verdict on three tiny sizes is not asserted
        ),
        # the bad usages the issue names
        "unknown_command": (["frobnicate"], 2),
        "missing_file": (["psd", str(f["pd_npy"].with_name("absent.npy"))], 2),
        "malformed_csv": (["psd", str(f["malformed_csv"])], 2),
        "malformed_expr": (["kernel", "poly(2,, c=1)", "--dim", "3"], 2),
    }


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


@pytest.fixture(scope="module")
def runs(files, tmp_path_factory):
    cwd = tmp_path_factory.mktemp("cwd")
    cases = _subprocess_cases(files)
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = {name: pool.submit(_run, argv, cwd) for name, (argv, _) in cases.items()}
        return {name: (fut.result(), cases[name][1]) for name, fut in futures.items()}


def _check_usage_error(code, stdout, stderr):
    assert code == 2, (code, stdout, stderr)
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("kernelcheck"), lines[0]
    assert "error:" in lines[0]
    assert stdout == ""


SUBPROCESS_BAD = ["unknown_command", "missing_file", "malformed_csv", "malformed_expr"]


@pytest.mark.parametrize("name", SUBPROCESS_BAD)
def test_bad_usage_in_a_subprocess_is_one_line_and_exit_code_2(runs, name):
    proc, expected = runs[name]
    assert expected == 2
    _check_usage_error(proc.returncode, proc.stdout, proc.stderr)


def test_bad_usage_messages_say_what_is_wrong(runs):
    msg = {name: runs[name][0].stderr for name in SUBPROCESS_BAD}
    assert "invalid choice: 'frobnicate'" in msg["unknown_command"]
    assert "no such file" in msg["missing_file"] and "absent.npy" in msg["missing_file"]
    assert "cannot read a matrix" in msg["malformed_csv"]
    assert "column 8" in msg["malformed_expr"]


@pytest.fixture(scope="module")
def in_process_bad(files):
    return _in_process_bad_usage(files)


@pytest.mark.parametrize(
    "name",
    list(
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
    ),
)
def test_bad_usage_in_process_is_one_line_and_exit_code_2(in_process_bad, name, capsys):
    code = cli.main(in_process_bad[name])
    captured = capsys.readouterr()
    _check_usage_error(code, captured.out, captured.err)


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


def test_version(capsys):
    import kernelcheck

    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"kernelcheck {kernelcheck.__version__}"


def test_essay_writes_the_report(runs, files):
    proc, expected = runs["essay"]
    assert proc.returncode == expected, proc.stdout + proc.stderr
    ids = ["C1", "C7", "C8", "C12"]
    rows = [line.split()[0] for line in proc.stdout.splitlines()[2:] if line.startswith("C")]
    assert rows == ids
    out = files["essay_out"]
    report = json.loads((out / "report.json").read_text())
    assert [c["id"] for c in report["claims"]] == ids
    assert report["exit_code"] == 0 and report["level"] == "quick"
    md = (out / "report.md").read_text()
    assert md.startswith("# kernelcheck essay report")
    pngs = list(out.glob("*.png"))
    assert [p.name for p in pngs] == ["C12.png"]
    assert pngs[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "](C12.png)" in md
    assert not list(out.glob(".*.tmp"))  # no temporary files left behind


def test_essay_json_subset(runs):
    proc, expected = runs["essay_json"]
    assert proc.returncode == expected, proc.stderr
    report = json.loads(proc.stdout)
    assert [c["id"] for c in report["claims"]] == ["C7", "C8"]
    assert all(c["verdict"] == "verified" for c in report["claims"])


@pytest.mark.parametrize("name", ["psd_npy", "psd_csv_refuted"])
def test_psd_exit_codes(runs, name):
    proc, expected = runs[name]
    assert proc.returncode == expected, proc.stdout + proc.stderr
    assert proc.stderr == ""


def test_psd_json_is_the_check_psd_result(runs, files):
    from kernelcheck.psd import check_psd

    proc, _ = runs["psd_csv_refuted"]
    payload = json.loads(proc.stdout)
    direct = check_psd(np.loadtxt(files["notpsd_csv"], delimiter=",")).to_dict()
    assert payload["verdict"] == direct["verdict"]


@pytest.mark.parametrize(("name", "expected"), [("pd_txt", 0), ("two_npz", 1)])
def test_psd_other_formats_in_process(files, name, expected, capsys):
    argv = ["psd", str(files[name])] + (["--key", "notpsd"] if name == "two_npz" else [])
    assert cli.main(argv) == expected
    assert capsys.readouterr().err == ""


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

    k = parse_kernel(payload["expression"])
    assert payload["kernel"] == repr(k)
    assert payload["feature_dim"] == k.feature_dim(2)
    assert payload["feature_map_report"]["passed"] is True


def test_unbiased_runs(runs, files):
    proc, expected = runs["unbiased"]
    assert proc.returncode == expected, proc.stdout + proc.stderr
    assert (files["unbiased_out"] / "report.json").exists()


def test_scaling_runs(runs, files):
    proc, _ = runs["scaling"]
    assert proc.returncode in (0, 1, 3), proc.stderr
    payload = json.loads(proc.stdout)
    assert payload["sizes"] == {"quadratic": [64, 128, 256], "linear": [64, 128, 256]}
    # three sizes are too few for a timing verdict: not judged (inconclusive), never refuted
    assert proc.returncode == 3 and {f["verdict"] for f in payload["forms"]} == {"not judged"}
    assert (files["scaling_out"] / "scaling.json").exists()


# ---------------------------------------------------------------------------
# SIGINT


def test_sigint_during_essay_leaves_no_file(tmp_path):
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kernelcheck",
            "essay",
            "--thorough",
            "--claims",
            "C12,C15",
            "--out",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    try:
        header = proc.stdout.readline()  # printed before the first check starts
        assert header.startswith("claim"), header
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, (stdout, stderr)
    assert "Traceback" not in stderr
    assert stderr.strip() == f"kernelcheck essay: interrupted; nothing was written to {out}"
    assert not out.exists() or not any(out.iterdir())


def test_sigint_while_writing_completes_the_report_then_exits(tmp_path, monkeypatch):
    """SIGINT arriving while the files are moved into place is held until every one is."""
    from kernelcheck._src.claims import essay
    from kernelcheck._src.core import report as bundle

    report = essay.run_essay(["C7", "C12"], "quick")
    calls = _interrupt_on_first_call(bundle, "_move", monkeypatch)
    with pytest.raises(InterruptedAfterWrite):
        essay.write_report(report, tmp_path)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted(Path(c).name for c in calls)
    assert {"report.md", "report.json"} <= set(names)
    assert json.loads((tmp_path / "report.json").read_text())["summary"]["total"] == 2


def test_interrupt_before_writing_leaves_the_folder_untouched(tmp_path, monkeypatch):
    from kernelcheck._src.claims import essay

    report = essay.run_essay(["C12"], "quick")
    (tmp_path / "report.md").write_text("previous report\n")

    def interrupted(_report):
        raise KeyboardInterrupt

    monkeypatch.setattr(essay, "render_plots", interrupted)
    with pytest.raises(KeyboardInterrupt):
        essay.write_report(report, tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"]
    assert (tmp_path / "report.md").read_text() == "previous report\n"


_UNBIASED_SMALL = ["unbiased", "--trials", "2000", "--num-features", "8", "--dim", "2"]
_SCALING_SMALL = ["scaling", "--sizes", "32,64,128", "--repeats", "1", "--json"]


def _interrupt_on_first_call(module, name, monkeypatch):
    """Make ``module.name`` deliver a real SIGINT to this process on its first call.

    Records the destination (second argument) of every call, else the first.
    """
    real = getattr(module, name)
    calls = []

    def wrapped(*args, **kwargs):
        if not calls:
            os.kill(os.getpid(), signal.SIGINT)
        calls.append(args[1] if len(args) > 1 else (args[0] if args else None))
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapped)
    return calls


@pytest.mark.parametrize("command", ["unbiased", "scaling"])
def test_sigint_during_the_writes_completes_the_report(command, tmp_path, monkeypatch, capsys):
    """SIGINT while ``--out`` files are written: every file lands whole, then exit 130."""
    from kernelcheck._src.core import report as bundle

    out = tmp_path / "out"
    calls = _interrupt_on_first_call(bundle, "_move", monkeypatch)
    if command == "unbiased":
        argv, expected = _UNBIASED_SMALL, {"report.json", "report.md"}
    else:
        argv, expected = _SCALING_SMALL, {"scaling.md", "scaling.json"}
    code = cli.main([*argv, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == cli.EXIT_INTERRUPTED, err
    assert err.strip() == (
        f"kernelcheck {command}: interrupted; the report in {out} was already complete"
    )
    assert calls, "the interrupt was never sent"
    names = {p.name for p in out.iterdir()}
    assert expected <= names
    assert not any(n.endswith(".tmp") for n in names)
    json.loads((out / next(n for n in expected if n.endswith(".json"))).read_text())


@pytest.mark.parametrize("command", ["unbiased", "scaling"])
def test_interrupt_before_the_writes_leaves_no_file(command, tmp_path, monkeypatch, capsys):
    """KeyboardInterrupt during the run: exit 130, a message saying so, no file in ``--out``."""
    from kernelcheck._src.scaling import experiment as scaling
    from kernelcheck._src.verify.unbiased import api as verify_unbiased
    from kernelcheck._src.verify.unbiased import writer as unbiased_report

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    out = tmp_path / "out"
    if command == "unbiased":
        monkeypatch.setattr(unbiased_report, "render_plots", interrupted)
        monkeypatch.setattr(verify_unbiased.UnbiasedReport, "to_markdown", interrupted)
        argv = _UNBIASED_SMALL
    else:
        monkeypatch.setattr(scaling, "_measure_form", interrupted)
        argv = _SCALING_SMALL
    code = cli.main([*argv, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == cli.EXIT_INTERRUPTED, err
    assert err.strip() == f"kernelcheck {command}: interrupted; nothing was written to {out}"
    assert not out.exists() or not any(out.iterdir())


# ---------------------------------------------------------------------------
# In-process: argument values and matrix files


def test_load_matrix_formats_agree(files):
    a = cli.load_matrix(files["pd_npy"])
    np.testing.assert_array_equal(cli.load_matrix(files["two_npz"], "pd"), a)
    # savetxt writes 18 significant digits: the text round trip is exact for float64
    np.testing.assert_array_equal(cli.load_matrix(files["pd_txt"]), a)


def test_load_matrix_refuses_pickles(tmp_path):
    path = tmp_path / "obj.npy"
    np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(cli.UsageError, match="cannot read a matrix"):
        cli.load_matrix(path)


# ---------------------------------------------------------------------------
# Extreme matrices and points on the command line: a verdict or one line, exit 2
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "matrix, code",
    [
        (np.full((2, 2), 1e308), 0),
        (np.eye(3, dtype=np.float16), 0),
        (np.eye(2, dtype=np.int64), 0),
        (np.eye(2) + 0j, 2),
        (np.zeros((0, 0)), 2),
        (np.array([[1.0, 2.0], [2.0, 1.0]]), 1),
    ],
)
def test_cli_psd_on_extreme_files(tmp_path, capsys, matrix, code):
    path = tmp_path / "K.npy"
    np.save(path, matrix)
    assert cli.main(["psd", str(path)]) == code
    err = capsys.readouterr().err
    assert "Traceback" not in err and (code != 2 or err.count("\n") == 1)


def test_cli_kernel_and_unbiased_extremes(tmp_path, capsys):
    pts = tmp_path / "p.txt"
    np.savetxt(pts, np.array([[1e200, 0.0], [0.0, 1.0]]))
    assert cli.main(["kernel", "exponential", "--dim", "2", "--points", str(pts)]) == 3
    err = capsys.readouterr().err
    assert err.startswith("kernelcheck kernel: cannot decide: ") and err.count("\n") == 1
    assert (
        cli.main(["unbiased", "--dim", "100000", "--num-features", "100000", "--trials", "10"]) == 2
    )
    err = capsys.readouterr().err
    assert "would need 10000000000 entries" in err
    code = cli.main(
        ["unbiased", "--num-points", "1", "--dim", "1", "--num-features", "2", "--trials", "300"]
    )
    assert code in (0, 3)


def test_psd_decides_a_gram_at_rounding_level_asymmetry_and_names_the_flag(tmp_path, capsys):
    """C5: an ``.npy`` Gram whose asymmetry is at rounding level (one ulp) is decided
    without options and says so; a 1e-6 asymmetry is refused naming ``--symmetrize``
    (not the Python spelling), and decided with it."""
    from kernelcheck import cli

    K = np.array([[2.0, 1.0, 0.5], [1.0, 2.0, 1.0], [0.5, 1.0, 2.0]])
    K[0, 1] = np.nextafter(1.0, 2.0)
    np.save(tmp_path / "k.npy", K)
    assert cli.main(["psd", str(tmp_path / "k.npy")]) == 0
    assert "symmetric part of K" in capsys.readouterr().out
    K[0, 1] = 1.0 + 1e-6
    np.save(tmp_path / "bad.npy", K)
    assert cli.main(["psd", str(tmp_path / "bad.npy")]) == 2
    err = capsys.readouterr().err
    assert "pass --symmetrize" in err and "symmetrize=True" not in err
    assert cli.main(["psd", str(tmp_path / "bad.npy"), "--symmetrize"]) == 0
