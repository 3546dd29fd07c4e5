"""The two evaluation paths of batched positive-feature trials (claims C13, C16).

:class:`kernelcheck._src.features.base.ChunkEstimates` evaluates positive
random features *unshifted* (the per-point scales factored out of the
features, one product and one exp) where guards on small results prove that
nothing leaves the normal float64 range, and by the general *shifted* path
elsewhere.  Each test relates two computations: the two paths on the same
projections, or a path against the estimate written out in log space
(``logsumexp``) on projections built so that one guard must fail.

Error model of the comparisons: every estimate is ``exp(L)`` of an exponent
``L`` (a sum of ``|x'|^2 / 2`` terms and products ``w . x'``) computed with at
most ``2 d + 8`` roundings of terms no larger than ``A`` in magnitude, and a
sum of m positive terms; its relative error is at most
``gamma_(2 d + 8) A + gamma_m`` per path (each rounding of a term of size A
moves the exponent by ``A u``), so two paths or a path and the log-space
formula agree within twice that.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import logsumexp

from kernelcheck._src.features.base import ChunkEstimates, draw_projection
from kernelcheck._src.features.random import (
    HyperbolicRandomFeatures,
    OptimalPositiveRandomFeatures,
    PositiveRandomFeatures,
    TrigonometricRandomFeatures,
)

U = 2.0**-53


def _gamma(k: int) -> float:
    return k * U / (1 - k * U)


def _tolerance(d: int, m: int, A: float) -> float:
    """Twice one path's relative error bound (module docstring)."""
    return 2.0 * (_gamma(2 * d + 8) * A + _gamma(m))


def _log_space(W, Xs, Ys):
    """The estimates and rounding scales of one trial, written out in log space."""
    m = W.shape[0]
    Px, Py = Xs @ W.T, Ys @ W.T
    base = -0.5 * ((Xs * Xs).sum(1)[:, None] + (Ys * Ys).sum(1)[None, :]) - math.log(m)
    est = np.exp(logsumexp(Px[:, None, :] + Py[None, :, :], axis=-1) + base)
    norms = 0.5 * logsumexp(2 * Px, axis=-1)[:, None] + 0.5 * logsumexp(2 * Py, axis=-1)[None, :]
    return est, np.exp(norms + base)


def _run(chunk, path, W):
    c = W.shape[0]
    e = np.full((c, chunk.Xs.shape[0], chunk.Ys.shape[0]), np.nan)
    b = np.full_like(e, np.nan)
    out = getattr(chunk, path)(W, e, b)
    return out, e, b


@pytest.mark.parametrize("orthogonal", [False, True])
@pytest.mark.parametrize("d, m, scale", [(2, 3, 1.0), (5, 16, 0.7), (16, 64, 2.0)])
def test_the_unshifted_path_gives_the_shifted_numbers_to_rounding(orthogonal, d, m, scale):
    sampler = PositiveRandomFeatures.sampler(d, m, orthogonal=orthogonal, scale=scale)
    rng = np.random.default_rng(d * m)
    Xs = math.sqrt(scale) * 0.5 * rng.standard_normal((6, d)) / math.sqrt(d)
    Ys = math.sqrt(scale) * 0.5 * rng.standard_normal((4, d)) / math.sqrt(d)
    chunk = ChunkEstimates(sampler, Xs, Ys)
    assert chunk.factor is not None  # positive features, moderate norms: the fast path
    W = draw_projection(rng, d, m, orthogonal=orthogonal, batch=7)
    ok, e1, b1 = _run(chunk, "unshifted", W)
    assert ok
    _, e2, b2 = _run(chunk, "shifted", W)
    A = float(np.abs(W @ np.concatenate([Xs, Ys]).T).max()) + float((Xs * Xs).sum(1).max())
    tol = _tolerance(d, m, A)
    assert np.allclose(e1, e2, rtol=tol, atol=0) and np.allclose(b1, b2, rtol=tol, atol=0)
    assert np.all(b1 >= e1 * (1 - tol))  # Cauchy-Schwarz: the scale bounds the estimate


def test_batch_estimates_of_positive_features_take_the_unshifted_path():
    """The sampler's trials are the unshifted path's numbers, bit for bit, on the same
    draws; the other maps (no per-point factor to take out) always take the shifted path."""
    d, m = 4, 8
    sampler = PositiveRandomFeatures.sampler(d, m)
    X = 0.3 * np.random.default_rng(1).standard_normal((3, d))
    Y = 0.3 * np.random.default_rng(2).standard_normal((2, d))
    est, bound = sampler.batch_estimates(np.random.default_rng(9), 5, X, Y)
    W = draw_projection(np.random.default_rng(9), d, m, batch=5)
    ok, e, b = _run(ChunkEstimates(sampler, X, Y), "unshifted", W)
    assert ok and np.array_equal(est, e) and np.array_equal(bound, b)
    for cls in (TrigonometricRandomFeatures, HyperbolicRandomFeatures):
        assert ChunkEstimates(cls.sampler(d, m), X, Y).factor is None
    optimal = OptimalPositiveRandomFeatures.sampler(d, m, A=0.0)
    assert ChunkEstimates(optimal, X, Y).factor is None


# Inputs and projections built so that one guard must fail: x' and y' and every row
# w_i = (a + i / 4, b - i / 4).  The estimate exp(w . (x' + y') - (|x'|^2 + |y'|^2) / 2) / m
# is well inside the float64 range in each case, but a quantity of the unshifted path
# is not.
GUARD_CASES = {
    # exp(w . x') = exp(800): inf, so the unguarded estimate is inf
    "a feature overflows": ((4.0, 0.0), (0.0, 1.0), (200.0, -300.0)),
    # exp(w . x') = exp(-740): subnormal (a few bits), its square 0, so the unguarded
    # rounding scale is 0 and the estimate off in its third digit
    "a row maximum underflows": ((4.0, 0.0), (0.0, 1.0), (-185.0, 300.0)),
    # (|x'|^2 + |y'|^2) / 2 = 795: the factor exp(-795) / m is 0, so the unguarded
    # estimate is 0, while the features (at most exp(180)) are all in range
    "the factor underflows": ((34.5, 0.0), (0.0, 20.0), (5.0, 5.0)),
}


@pytest.mark.parametrize("case", sorted(GUARD_CASES))
def test_inputs_out_of_range_get_the_log_space_estimate(case):
    x, y, (a, b) = GUARD_CASES[case]
    m = 3
    W = np.array([[[a + i / 4, b - i / 4] for i in range(m)]])
    Xs, Ys = np.array([x]), np.array([y])
    chunk = ChunkEstimates(PositiveRandomFeatures.sampler(2, m), Xs, Ys)
    log_factor = -0.5 * (Xs @ Xs.T + Ys @ Ys.T) - math.log(m)
    # the unguarded formula is wrong here (this is what the guards are for) ...
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        factor = np.exp(log_factor)
        E = np.exp(W[0] @ np.concatenate([Xs, Ys]).T)
        raw_est = factor * (E[:, :1].T @ E[:, 1:])
        raw_bound = factor * np.sqrt((E[:, :1] ** 2).sum() * (E[:, 1:] ** 2).sum())
    ref_est, ref_bound = _log_space(W[0], Xs, Ys)
    assert np.isfinite(ref_est).all() and ref_est.min() > 1e-300
    tol = _tolerance(2, m, 1000.0)
    assert not (
        np.allclose(raw_est, ref_est, rtol=tol, atol=0)
        and np.allclose(raw_bound, ref_bound, rtol=tol, atol=0)
    )
    # ... a guard refuses the unshifted path (the per-call one, or the chunk's, which
    # then leaves the results untouched), and the chunk gets the log-space numbers
    if case == "the factor underflows":
        assert chunk.factor is None
    else:
        assert chunk.factor is not None
        ok, e, bd = _run(chunk, "unshifted", W)
        assert not ok and np.isnan(e).all() and np.isnan(bd).all()
    e, bd = np.empty((1, 1, 1)), np.empty((1, 1, 1))
    chunk(W, e, bd)
    assert np.allclose(e[0], ref_est, rtol=tol, atol=0)
    assert np.allclose(bd[0], ref_bound, rtol=tol, atol=0)


def test_pairs_whose_factor_underflows_take_the_shifted_path_in_batches():
    """With |x'|^2 / 2 = 800 every pair's factor underflows: the sampler's batches are
    the shifted path's numbers on the same draws (which equal maps drawn one by one)."""
    sampler = PositiveRandomFeatures.sampler(2, 4)
    X, Y = np.array([[40.0, 0.0]]), np.array([[-0.01, 0.0], [0.0, 0.02]])
    chunk = ChunkEstimates(sampler, X, Y)
    assert chunk.factor is None
    est, bound = sampler.batch_estimates(np.random.default_rng(3), 4, X, Y)
    W = draw_projection(np.random.default_rng(3), 2, 4, batch=4)
    e, b = np.empty_like(est), np.empty_like(bound)
    chunk.shifted(W, e, b)
    assert np.array_equal(est, e) and np.array_equal(bound, b)


def test_blocks_of_the_unshifted_path_fall_back_one_by_one():
    """The unshifted path runs over blocks of trials (``BLOCK_ELEMENTS``): a block that
    fails a guard gets the shifted path, the other blocks keep their unshifted numbers,
    and the per-trial numbers do not depend on the block size."""
    m = 3
    x, y, (a, b) = GUARD_CASES["a feature overflows"]
    bad = np.array([[a + i / 4, b - i / 4] for i in range(m)])
    good = np.random.default_rng(0).standard_normal((2, m, 2))
    W = np.stack([good[0], bad, good[1]])
    Xs, Ys = np.array([x]), np.array([y])
    chunk = ChunkEstimates(PositiveRandomFeatures.sampler(2, m), Xs, Ys)
    chunk.BLOCK_ELEMENTS = m * 2  # one trial per block
    e, bd = np.empty((3, 1, 1)), np.empty((3, 1, 1))
    chunk(W, e, bd)
    for t in (0, 2):
        ok, e1, b1 = _run(chunk, "unshifted", W[t : t + 1])
        assert ok and np.array_equal(e[t], e1[0]) and np.array_equal(bd[t], b1[0])
    tol = _tolerance(2, m, 1000.0)
    for t in range(3):
        ref_est, ref_bound = _log_space(W[t], Xs, Ys)
        assert np.allclose(e[t], ref_est, rtol=tol, atol=0)
        assert np.allclose(bd[t], ref_bound, rtol=tol, atol=0)
    # every trial in one block: the guard sends all three to the shifted path
    chunk.BLOCK_ELEMENTS = ChunkEstimates.BLOCK_ELEMENTS
    e3, b3 = np.empty_like(e), np.empty_like(bd)
    chunk(W, e3, b3)
    es, bs = np.empty_like(e), np.empty_like(bd)
    chunk.shifted(W, es, bs)
    assert np.array_equal(e3, es) and np.array_equal(b3, bs)


def test_the_block_size_does_not_change_the_trials():
    sampler = PositiveRandomFeatures.sampler(5, 16)
    X = 0.3 * np.random.default_rng(1).standard_normal((4, 5))
    W = draw_projection(np.random.default_rng(2), 5, 16, batch=9)
    out = []
    for block in (ChunkEstimates.BLOCK_ELEMENTS, 16 * 8, 16 * 8 * 4):
        chunk = ChunkEstimates(sampler, X, X)
        chunk.BLOCK_ELEMENTS = block
        e, b = np.empty((9, 4, 4)), np.empty((9, 4, 4))
        chunk(W, e, b)
        out.append((e, b))
    for e, b in out[1:]:
        assert np.array_equal(e, out[0][0]) and np.array_equal(b, out[0][1])
