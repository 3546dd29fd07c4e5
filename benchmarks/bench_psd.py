"""Benchmark of check_psd's default path (claim C5), next to its floor and its peer.

Group ``psd``, measured in the same run on one positive definite Gaussian
Gram matrix (n = 2000, points in R^20, plus 1e-3 I so that it is safely
definite):

* ``check_psd(K)`` -- the default ladder: symmetry and finiteness checks,
  diagonal scaling, Rump's certified Cholesky, one inverse iteration;
* ``numpy.linalg.cholesky(K)`` -- the floor: a bare factorisation, no proof;
* ``numpy.linalg.eigvalsh(K)`` -- the peer: what "check the smallest
  eigenvalue" costs, again without a proof.

Target: check_psd <= 1.3 x numpy.linalg.cholesky and faster than eigvalsh.

Group ``psd-pipeline`` measures the same two calls right after the Gram
matrix is computed (``Gaussian(...)(X)``, NumPy's BLAS), as a user's code
runs them.  Where NumPy and SciPy load separate OpenBLAS builds (the PyPI
wheels), NumPy's worker threads still spin for a while after the Gram's
matrix products and compete with SciPy's ``dpotrf`` threads; NumPy's own
Cholesky does not meet that competition.  Reported, not targeted.
Each benchmark also checks its answer against the others (the certificate
must agree with a successful factorisation and a positive smallest
eigenvalue), so under ``--benchmark-disable`` (n = 300) the file is a
correctness test.

Group ``psd-lowrank``: a rank-5 Gram ``X X^T`` (n = 2000, X Gaussian (n, 5)),
singular, so rounding leaves it indefinite by about ``u ||K||``:

* ``check_psd(K)`` -- decided PSD within the default tolerance by the
  low-rank certificate (pivoted Cholesky, rigorous residual bound);
* ``numpy.linalg.cholesky(K + 1e-8 I)`` -- the floor: a factorisation of the
  shifted matrix, no proof.

Target: check_psd <= 3 x the floor.

Group ``psd-exact``: FLINT's exact elimination (``check_psd(K, tol=0)``) of
a 300 x 300 rank-20 integer Gram (entries of X in [-5, 5]); target under
10 s.

Reproduce: ``python3 -m pytest benchmarks/bench_psd.py --benchmark-only``.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck import Gaussian
from kernelcheck.psd import Verdict, check_psd


def _points(n: int) -> np.ndarray:
    return np.random.default_rng(0).standard_normal((n, 20))


def _gram(n: int) -> np.ndarray:
    X = _points(n)
    return Gaussian(np.sqrt(20.0))(X) + 1e-3 * np.eye(n)


@pytest.mark.benchmark
def test_check_psd_default(benchmark, size_for):
    benchmark.group = "psd"
    K = _gram(size_for(2000, 300))
    r = benchmark(check_psd, K)
    assert r.verdict is Verdict.POSITIVE_DEFINITE and r.certified and r.method == "cholesky"
    # the reported estimate is an upper bound of lambda_min, which is > 0 (certified)
    assert np.linalg.eigvalsh(K)[0] <= r.min_eigenvalue * (1 + 1e-10)


@pytest.mark.benchmark
def test_numpy_cholesky_floor(benchmark, size_for):
    benchmark.group = "psd"
    K = _gram(size_for(2000, 300))
    L = benchmark(np.linalg.cholesky, K)
    # backward error of Cholesky: |L L^T - K| <= gamma_(n+1) |L||L^T| (Higham Thm 10.3)
    n = K.shape[0]
    g = (n + 1) * 2.0**-53 / (1 - (n + 1) * 2.0**-53)
    assert np.all(np.abs(L @ L.T - K) <= 2 * g * (np.abs(L) @ np.abs(L).T))


@pytest.mark.benchmark
def test_numpy_eigvalsh_peer(benchmark, size_for):
    benchmark.group = "psd"
    K = _gram(size_for(2000, 300))
    w = benchmark(np.linalg.eigvalsh, K)
    assert w[0] > 0 and check_psd(K).is_psd


@pytest.mark.benchmark
def test_pipeline_gram_then_check_psd(benchmark, size_for):
    benchmark.group = "psd-pipeline"
    X = _points(size_for(2000, 300))
    r = benchmark(lambda: check_psd(Gaussian(np.sqrt(20.0))(X) + 1e-3 * np.eye(len(X))))
    assert r.verdict is Verdict.POSITIVE_DEFINITE and r.certified


@pytest.mark.benchmark
def test_pipeline_gram_then_numpy_cholesky(benchmark, size_for):
    benchmark.group = "psd-pipeline"
    X = _points(size_for(2000, 300))
    L = benchmark(lambda: np.linalg.cholesky(Gaussian(np.sqrt(20.0))(X) + 1e-3 * np.eye(len(X))))
    assert np.all(np.diagonal(L) > 0)  # a factor exists: the Gram is definite


def _lowrank_gram(n: int, r: int = 5) -> np.ndarray:
    X = np.random.default_rng(1).standard_normal((n, r))
    return X @ X.T


@pytest.mark.benchmark
def test_check_psd_rank_deficient(benchmark, size_for):
    benchmark.group = "psd-lowrank"
    K = _lowrank_gram(size_for(2000, 300))
    r = benchmark(check_psd, K)
    assert (r.verdict, r.method, r.certified) == (Verdict.POSITIVE_SEMIDEFINITE, "lowrank", True)
    assert -r.tol.value <= r.lower_bound <= 0


@pytest.mark.benchmark
def test_numpy_cholesky_shifted_floor(benchmark, size_for):
    benchmark.group = "psd-lowrank"
    K = _lowrank_gram(size_for(2000, 300))
    shifted = K + 1e-8 * np.eye(K.shape[0])
    L = benchmark(np.linalg.cholesky, shifted)
    assert np.all(np.diagonal(L) > 0)


@pytest.mark.benchmark
def test_exact_rung_on_a_rank_deficient_integer_gram(benchmark, size_for):
    pytest.importorskip("flint")
    benchmark.group = "psd-exact"
    n = size_for(300, 120)
    X = np.random.default_rng(2).integers(-5, 6, size=(n, 20)).astype(float)
    K = X @ X.T
    r = benchmark.pedantic(check_psd, (K,), {"tol": 0}, rounds=1, iterations=1)
    assert (r.verdict, r.method, r.certified) == (Verdict.POSITIVE_SEMIDEFINITE, "exact", True)
