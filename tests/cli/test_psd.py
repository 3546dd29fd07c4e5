"""``kernelcheck psd FILE``: exit codes, formats, extreme matrices, the methods, one enclosure."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from kernelcheck import cli
from kernelcheck._src.psd.ladder import METHODS


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
    assert payload["result"]["verdict"] == direct["verdict"]
    assert payload["command"] == "psd" and payload["outcome"] == direct["outcome"]


@pytest.mark.parametrize(("name", "expected"), [("pd_txt", 0), ("two_npz", 1)])
def test_psd_other_formats_in_process(files, name, expected, capsys):
    argv = ["psd", str(files[name])] + (["--key", "notpsd"] if name == "two_npz" else [])
    assert cli.main(argv) == expected
    assert capsys.readouterr().err == ""


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


def test_psd_decides_a_gram_at_rounding_level_asymmetry_and_names_the_flag(tmp_path, capsys):
    """C5: an ``.npy`` Gram whose asymmetry is at rounding level (one ulp) is decided
    without options and says so; a 1e-6 asymmetry is refused naming ``--symmetrize``
    (not the Python spelling), and decided with it."""
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


def test_psd_lists_and_checks_its_methods(tmp_path, capsys):
    np.save(tmp_path / "pd.npy", np.array([[2.0, 1.0], [1.0, 2.0]]))
    assert cli.main(["psd", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert ", ".join(METHODS) in help_text
    assert cli.main(["psd", str(tmp_path / "pd.npy"), "--method", "cholesky"]) == 0
    capsys.readouterr()
    assert cli.main(["psd", str(tmp_path / "pd.npy"), "--method", "bogus"]) == 2
    err = capsys.readouterr().err
    assert all(m in err for m in METHODS), err


def _gaussian_gram(n: int = 30, lengthscale: float = 1.0) -> np.ndarray:
    X = np.random.default_rng(0).normal(size=(n, 3))
    D = ((X[:, None] - X[None]) ** 2).sum(-1)
    return np.exp(-D / (2 * lengthscale**2))


@pytest.mark.parametrize(
    "matrix",
    [_gaussian_gram(), np.array([[1.0, 2.0], [2.0, 1.0]]), np.array([[2.0, 1.0], [1.0, 2.0]])],
    ids=["gaussian-gram", "not-psd", "pd"],
)
def test_text_and_json_report_one_enclosure_of_lambda_min(matrix, tmp_path, capsys):
    """The line's ``lambda_min in [a, b]`` is the JSON's ``lambda_min_interval``.

    On a Gaussian Gram the proven upper bound is a diagonal entry (1.0) while
    the Cholesky estimate encloses lambda_min far tighter; both outputs give
    the tighter enclosure, which contains the true lambda_min.
    """
    path = tmp_path / "K.npy"
    np.save(path, matrix)
    code = cli.main(["psd", str(path)])
    text = capsys.readouterr().out
    assert cli.main(["psd", str(path), "--json"]) == code
    result = json.loads(capsys.readouterr().out)["result"]
    low, high = (float(v) for v in result["lambda_min_interval"])
    shown = re.search(r"lambda_min in \[([^,]+), ([^\]]+)\]", text)
    assert shown, text
    assert shown.groups() == (f"{low:.3g}", f"{high:.3g}")
    exact = float(np.linalg.eigvalsh(matrix)[0])
    assert low <= exact <= high
    assert float(result["lower_bound"]) <= low and high <= float(result["upper_bound"])
