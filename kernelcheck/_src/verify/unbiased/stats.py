"""The per-pair statistics of :func:`kernelcheck.verify.unbiased` (claims C13, C17, C18).

From the merged moments of a run, the target kernel values and, when the
sampler has it, the closed-form theory: per pair the mean and its
simultaneous (Bonferroni) interval, the test of ``bias = 0`` (z with the
closed-form variance, t with the sample variance, Chebyshev when the normal
law is not trusted), the Berry-Esseen gate, the one-sided test of "variance
above theory", Holm's step-down procedure over all these tests, the MSE with
its interval, the smallest detectable bias, and the number of trials that
would decide an untestable pair or confirm a failing one.  The formulas and their
sources are in the docstring of :func:`kernelcheck.verify.unbiased` and in
``docs/statistics.md``; the verdicts built on them are made in
:mod:`kernelcheck._src.verify.unbiased.api`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy.special import ndtr, ndtri

from kernelcheck._src.mc.engine import Moments, berry_esseen_bound, trials_needed

__all__ = [
    "PairStats",
    "pair_statistics",
    "holm",
    "critical_value",
    "trials_to_detect",
    "median_finite",
]


def critical_value(alpha: float, tests: int) -> float:
    """Two-sided Bonferroni critical value ``z_(1 - alpha / (2 tests))``.

    The first step of Holm's procedure over ``tests`` hypotheses rejects a
    normal test exactly beyond it; the simultaneous intervals use it too.
    """
    return float(ndtri(1.0 - alpha / (2.0 * tests)))


def trials_to_detect(sigma, effect, zc: float, zpow: float) -> np.ndarray:
    """Trials after which a mean shift ``effect`` is detected with probability ``power``.

    ``ceil(((zc + z_power) sigma / |effect|)^2)`` with ``sigma`` the standard
    deviation of one trial: at that N the z statistic ``|effect| sqrt(N) / sigma``
    exceeds the critical value ``zc`` with probability ``Phi(z_power) = power``
    (normal approximation).  NaN where ``effect`` is 0 or ``sigma`` is unknown.
    """
    sigma = np.asarray(sigma, dtype=float)
    effect = np.abs(np.asarray(effect, dtype=float))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        n = np.ceil(((zc + zpow) * sigma / effect) ** 2)
    ok = np.isfinite(n) & (effect > 0) & np.isfinite(sigma) & (sigma > 0)
    return np.where(ok, np.maximum(n, 2.0), np.nan)


def median_finite(values) -> float:
    """The median of the finite entries of ``values`` (NaN when there is none)."""
    v = np.asarray(values, dtype=float).ravel()
    v = v[np.isfinite(v)]
    return float(np.median(v)) if v.size else float("nan")


def holm(p: np.ndarray, alpha: float) -> np.ndarray:
    """Holm's step-down rejections at family-wise level ``alpha`` (NaN = no test)."""
    p = np.asarray(p, dtype=float)
    reject = np.zeros(p.shape, dtype=bool)
    idx = np.flatnonzero(np.isfinite(p))
    M = idx.size
    order = idx[np.argsort(p[idx], kind="stable")]
    for rank, k in enumerate(order):
        if p[k] <= alpha / (M - rank):
            reject[k] = True
        else:
            break
    return reject


class PairStats(NamedTuple):
    """The per-pair statistics of a run: arrays of the target's shape, and scalars."""

    N: int
    zc: float
    use_th: bool
    mean: np.ndarray
    s2: np.ndarray
    tol: np.ndarray
    dev: np.ndarray
    excess: np.ndarray
    var_th: np.ndarray
    se: np.ndarray
    z: np.ndarray
    be: np.ndarray
    need: np.ndarray
    rounding: np.ndarray
    testable: np.ndarray
    p_mean: np.ndarray
    p_var: np.ndarray
    rej_mean: np.ndarray
    rej_var: np.ndarray
    mse: np.ndarray
    mse_th: np.ndarray
    mse_h: np.ndarray
    det: np.ndarray
    ci_se: np.ndarray
    det_abs: np.ndarray
    confirm: np.ndarray


def _unknown_if_nan(ratio: np.ndarray) -> np.ndarray:
    """A moment ratio with NaN (from a zero variance) read as unknown, ``inf``."""
    return np.where(np.isnan(ratio), np.inf, ratio)


def pair_statistics(mo: Moments, t, t_err, theory, kind, alpha, power, be_tol) -> PairStats:
    """Means, intervals, tests (Holm over all of them), MSE and power, entrywise over pairs."""
    N = mo.count
    nx, ny = t.shape
    P = nx * ny
    mean = mo.mean
    s2 = mo.variance()
    tol = 2.0 * t_err + (mo.maximum if mo.maximum is not None else 0.0)
    dev = np.abs(mean - t)
    excess = np.maximum(dev - tol, 0.0)
    zc = critical_value(alpha, P)
    zpow = float(ndtri(power))
    nan = np.full(t.shape, np.nan)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if theory is not None:
            mu = np.asarray(theory["mean"], dtype=float)
            c = np.asarray(theory["central"], dtype=float)
            var_th = mu**2 * c[2]
            kurt_th = c[4] / c[2] ** 2
            var_y_th = mu**4 * (c[4] - c[2] ** 2)  # Var((X - mu)^2)
            ky = (c[8] - 4 * c[6] * c[2] + 6 * c[4] * c[2] ** 2 - 3 * c[2] ** 4) / (
                c[4] - c[2] ** 2
            ) ** 2
        else:
            var_th = kurt_th = var_y_th = ky = nan
        use_th = kind == "exact"
        sigma = np.sqrt(var_th) if use_th else np.sqrt(s2)
        kurt = kurt_th if use_th else mo.kurtosis()
        # NaN (zero variance: judged by rounding below) has no Berry-Esseen bound;
        # read as "unknown" (inf), it gives the same gate: not testable by the CLT
        ratio = _unknown_if_nan(np.sqrt(np.maximum(kurt, 1.0)))
        be = berry_esseen_bound(ratio, N)
        be = np.where(np.isfinite(be), be, np.inf)
        # trials for the gate: from the closed-form kurtosis only; the sample
        # kurtosis of a heavy-tailed estimator is far too small (it misses the
        # rare large values), so without theory the number is unknown (NaN)
        need = np.where(use_th, trials_needed(ratio, be_tol), np.nan)
        se = sigma / math.sqrt(N)
        z = excess / se
        rounding = (np.sqrt(s2) <= tol) & (~use_th | ~(np.sqrt(var_th) > tol))
        testable = (be <= be_tol) & ~rounding & (se > 0)
        p_norm = 2.0 * ndtr(-z)
        p_cheb = np.minimum(1.0, 1.0 / z**2)
        p_mean = np.where(testable, p_norm, np.where(use_th & ~rounding, p_cheb, np.nan))
        # variance above theory (one-sided), known fourth moment, gated on Var((X-mu)^2)
        be_v = berry_esseen_bound(_unknown_if_nan(np.sqrt(np.maximum(ky, 1.0))), N)
        var_testable = use_th & ~rounding & np.isfinite(be_v) & (be_v <= be_tol) & (var_y_th > 0)
        z_v = (s2 - var_th) / np.sqrt(var_y_th / N)
        p_var = np.where(var_testable, ndtr(-z_v), np.nan)
        p_all = np.concatenate([p_mean.ravel(), p_var.ravel()])
        rej = holm(p_all, alpha)
        # Holm's first step rejects a two-sided normal test beyond z_(1 - alpha/(2M)),
        # M the number of tests: the power statements use that critical value
        zdet = critical_value(alpha, max(int(np.isfinite(p_all).sum()), 1))
        rej_mean = rej[:P].reshape(t.shape)
        rej_var = rej[P:].reshape(t.shape)
        # MSE and its simultaneous interval
        mse = (mo.m2 + N * (mean - t) ** 2) / N
        if theory is not None:
            mse_th = var_th + (mu - t) ** 2
            var_y = var_y_th if use_th else mo.m4 / N - (mo.m2 / N) ** 2
        else:
            mse_th = nan
            var_y = mo.m4 / N - (mo.m2 / N) ** 2
        mse_h = zc * np.sqrt(np.maximum(var_y, 0.0) / N)
        det_abs = (zdet + zpow) * se
        det = det_abs / np.abs(t)
        ci_se = np.where(rounding, 0.0, se)
        # trials that detect the measured excess (mean, or variance above theory)
        # with probability `power`: how many a confirming run with another seed needs
        confirm = np.where(
            rej_var & ~rej_mean,
            trials_to_detect(np.sqrt(var_y_th), s2 - var_th, zdet, zpow),
            trials_to_detect(sigma, excess, zdet, zpow),
        )
        # ... and never fewer than the normal approximation needs (the closed-form
        # gate, or this run's N, whose gate passed)
        confirm = np.maximum(confirm, np.where(np.isfinite(need), need, N))
        confirm = np.where(rounding, np.nan, confirm)
    return PairStats(
        N,
        zc,
        use_th,
        mean,
        s2,
        tol,
        dev,
        excess,
        var_th,
        se,
        z,
        be,
        need,
        rounding,
        testable,
        p_mean,
        p_var,
        rej_mean,
        rej_var,
        mse,
        mse_th,
        mse_h,
        det,
        ci_se,
        det_abs,
        confirm,
    )
