"""Benchmarks of Gram matrices and exact feature maps, each next to its peer or floor.

Groups (``benchmark.group``), each measured in the same run:

* ``gram-polynomial``: ``Polynomial(3, c=1)`` Gram on X of shape (4000, 64)
  against ``sklearn.metrics.pairwise.polynomial_kernel(X, degree=3, gamma=1,
  coef0=1)`` (the peer) and the GEMM ``X @ X.T`` alone (the floor: the same
  2 n^2 d multiply-adds with no elementwise work).
* ``features-exp2``: the truncated Taylor map ``exp(Linear(), order=2).features()``
  on X of shape (n, 16), n = 1024, 2048, 4096, against a plain NumPy build of
  the same monomials; the time should grow with the output size n D.

Every benchmark also checks that its result agrees with the other computation
within the rounding-error bound of the error model (unit roundoff u), so under
``--benchmark-disable`` (small inputs) the file is a correctness test.

Reproduce: ``python3 -m pytest benchmarks/bench_kernels.py --benchmark-only``.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck._src.core.rounding import matmul_error_bound
from kernelcheck.kernels import Linear, Polynomial, exp

sklearn_pairwise = pytest.importorskip("sklearn.metrics.pairwise")

D_GRAM = 64


def _points(n: int, d: int, seed: int) -> np.ndarray:
    # Rows of norm about 1, so (x.y + 1)^3 stays of order 1.
    return np.random.default_rng(seed).standard_normal((n, d)) / np.sqrt(d)


def _check_gram(G: np.ndarray, X: np.ndarray, kernel) -> None:
    """G agrees with the kernelcheck Gram within twice its a-priori error bound.

    Both sides evaluate (x.y + 1)^3 from an inner product of length d; the
    bound ``kernel.error_bound(X)`` (gamma_(d+1) on the inner product, then
    the cube) holds for each, so their difference is within twice it.
    """
    ref = kernel(X)
    bound = 2.0 * kernel.error_bound(X)
    excess = np.abs(G - ref) - bound
    assert excess.max() <= 0, f"Gram differs by {np.abs(G - ref).max():.3g} beyond its bound"


@pytest.mark.benchmark(group="gram-polynomial")
def test_gram_polynomial_kernelcheck(benchmark, size_for):
    X = _points(size_for(4000, 300), D_GRAM, 0)
    k = Polynomial(3, c=1)
    G = benchmark(k, X)
    peer = sklearn_pairwise.polynomial_kernel(X, degree=3, gamma=1, coef0=1)
    _check_gram(peer, X, k)
    assert G.shape == (len(X), len(X))


@pytest.mark.benchmark(group="gram-polynomial")
def test_gram_polynomial_sklearn_peer(benchmark, size_for):
    X = _points(size_for(4000, 300), D_GRAM, 0)
    G = benchmark(sklearn_pairwise.polynomial_kernel, X, degree=3, gamma=1, coef0=1)
    _check_gram(G, X, Polynomial(3, c=1))


@pytest.mark.benchmark(group="gram-polynomial")
def test_gram_polynomial_gemm_floor(benchmark, size_for):
    X = _points(size_for(4000, 300), D_GRAM, 0)
    S = benchmark(np.matmul, X, X.T)
    # The floor computes the inner products the Gram is built from.
    _check_gram((S + 1.0) ** 3, X, Polynomial(3, c=1))


# ---------------------------------------------------------------------------
# Truncated Taylor feature map of exp, order 2
# ---------------------------------------------------------------------------

D_FEAT = 16


def _taylor2_numpy(X: np.ndarray) -> np.ndarray:
    """Plain NumPy: [1, x, x_i x_j sqrt(1/alpha!)] for i <= j (the order-2 Taylor map of exp).

    exp(s) ~ 1 + s + s^2 / 2 and s^2 / 2 = sum_i x_i^2 y_i^2 / 2 + sum_{i<j} x_i x_j y_i y_j,
    so the squares carry 1/sqrt(2) and the cross terms 1.
    """
    n, d = X.shape
    i, j = np.triu_indices(d)
    w = np.where(i == j, np.sqrt(0.5), 1.0)
    return np.hstack([np.ones((n, 1)), X, X[:, i] * X[:, j] * w])


def _check_features(F: np.ndarray, G: np.ndarray, rows: int = 256) -> None:
    """Two maps of the same kernel give the same inner products (column order free).

    Each feature is a product of at most 3 rounded operations (relative error
    gamma_3), and each inner product of length D adds gamma_D:
    ``matmul_error_bound(|F|, |F|^T, extra_ops=6)`` bounds one side's error
    against the exact kernel, so the two Grams differ by at most the sum.
    """
    F, G = F[:rows], G[:rows]
    assert F.shape == G.shape
    bound = matmul_error_bound(np.abs(F), np.abs(F).T, extra_ops=6) + matmul_error_bound(
        np.abs(G), np.abs(G).T, extra_ops=6
    )
    diff = np.abs(F @ F.T - G @ G.T)
    assert (diff <= bound).all(), f"feature Grams differ by {diff.max():.3g} beyond the bound"


@pytest.mark.benchmark(group="features-exp2")
@pytest.mark.parametrize("n", [1024, 2048, 4096])
def test_features_exp2_kernelcheck(benchmark, size_for, n):
    X = _points(4096, D_FEAT, 1)[: size_for(n, n // 16)]
    phi = exp(Linear(), order=2).features()
    F = benchmark(phi, X)
    assert F.shape == (len(X), phi.output_dim(D_FEAT))
    benchmark.extra_info["output_size"] = int(F.size)
    _check_features(F, _taylor2_numpy(X))


@pytest.mark.benchmark(group="features-exp2")
@pytest.mark.parametrize("n", [1024, 2048, 4096])
def test_features_exp2_numpy_peer(benchmark, size_for, n):
    X = _points(4096, D_FEAT, 1)[: size_for(n, n // 16)]
    F = benchmark(_taylor2_numpy, X)
    benchmark.extra_info["output_size"] = int(F.size)
    _check_features(F, exp(Linear(), order=2).features()(X))


# ---------------------------------------------------------------------------
# Figure for docs/performance.md: python3 benchmarks/bench_kernels.py [OUT_DIR]
# ---------------------------------------------------------------------------


def main(argv=None) -> int:
    """Measure the Taylor feature map and its NumPy peer over n; write the figure and tables.

    Time against n = 1024 .. 16384 (d = 16, D = 153), both maps in the same
    run, one BLAS thread, CPU time; the cost model is the number of output entries
    n D, so a flat "entries per second" panel means time proportional to the
    output size.
    """
    import sys
    from pathlib import Path

    from threadpoolctl import threadpool_limits

    from kernelcheck.scaling import geometric_sizes, measure, plot_measurements

    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0] if args else "docs/img")
    phi = exp(Linear(), order=2).features()
    X = _points(16384, D_FEAT, 1)
    sizes = geometric_sizes(1024, 16384)
    D = phi.output_dim(D_FEAT)
    common = dict(
        make_input=lambda n: (X[:n],),
        repeats=7,
        statistic="min",
        clock="cpu",
        warmup=2,
        cost=lambda n: float(n * D),
        cost_unit="entry",
    )
    with threadpool_limits(1):
        runs = [
            measure(phi, sizes, label="exp(Linear(), order=2).features()", **common),
            measure(_taylor2_numpy, sizes, label="plain NumPy peer", **common),
        ]
    path = plot_measurements(
        runs,
        out / "features-exp2.png",
        title=f"order-2 Taylor features of exp, d = {D_FEAT}, D = {D}",
    )
    for m in runs:
        print(m.to_markdown())
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
