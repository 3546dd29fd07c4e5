"""Fixtures of the command-line tests: matrix files, a scratch place, the subprocess runs."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from tests.cli.commandline import run_kernelcheck, subprocess_cases


@pytest.fixture(scope="session")
def files(tmp_path_factory) -> dict[str, Path]:
    """Matrix files of every format, good and bad, and output folders (not yet created)."""
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


@pytest.fixture(scope="session")
def runs(files, tmp_path_factory):
    """``{case: (CompletedProcess, expected exit code)}`` of every subprocess case."""
    cwd = tmp_path_factory.mktemp("cwd")
    cases = subprocess_cases(files)
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = {
            name: pool.submit(run_kernelcheck, argv, cwd) for name, (argv, _) in cases.items()
        }
        return {name: (fut.result(), cases[name][1]) for name, fut in futures.items()}


@pytest.fixture
def place(tmp_path, monkeypatch):
    """The working folder: a file, a FIFO, a dangling link, a sparse .csv and a matrix."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("x")
    os.mkfifo(tmp_path / "fifo.csv")
    os.symlink(tmp_path / "nowhere" / "x", tmp_path / "dangling")
    with open(tmp_path / "sparse.csv", "wb") as fh:
        fh.truncate(2 * 1024**3)  # 2 GiB of holes: no disk behind it
    np.save(tmp_path / "m.npy", np.eye(3))
    np.savez(tmp_path / "big.npz", K=np.broadcast_to(np.zeros((1, 1)), (1, 1)))
    return tmp_path
