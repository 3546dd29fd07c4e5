"""The statistics of :func:`kernelcheck.verify.random_feature_attention`.

From the means and variances, over redraws, of a layer's attention output at
several numbers of features m, and the exact output ``A``:

* per output entry p, the ordinary least-squares fit of the bias
  ``b_p(m) = c_p + beta_p / m + gamma_p / m^2`` (``+ delta_p / m^3`` with
  five or more m) and the test of ``c_p = 0``
  (the bias left as m -> infinity).  A correct random-feature layer has
  ``c = 0``: its numerator and denominator are unbiased and the ratio's bias
  is ``beta / m + gamma / m^2 + O(m^-3)`` (claim C16); a bias that does not
  vanish with m (an ``eps`` added to the features, a wrong scaling) has
  ``c != 0``.  ``c_p`` is a fixed linear combination ``sum_q L_q mean_q`` of
  the means at the m values (the fit's weights do not depend on the data), so
  its variance is ``sum_q L_q^2 var_q / N`` and the z test is exact up to
  the normal approximation of the means (the outputs of a positive-feature
  layer lie in the convex hull of V's rows: every moment is finite).  The
  rounding tolerance ``sum_q |L_q| tol_q`` is subtracted from ``|c_p|`` first,
  so rounding never fails an entry;
* the C16 law along one direction: ``<b(m), u>`` (u from an independent
  pilot run) fitted by ``beta / m + gamma / m^2`` (``+ delta / m^3`` with five
  or more m) and its chi-square goodness of fit (:func:`fit_bias`);
* Holm's step-down procedure over the ``P`` entry tests and the goodness of
  fit keeps the family-wise false-alarm rate at ``alpha``;
* power: an entry whose asymptotic bias is ``tol_p + (z_(1 - alpha/2M) + z_power) se_p``
  (M tests, Holm's first-step critical value) is found with probability
  ``power``; a bias r times smaller needs r^2 times the trials.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy.special import ndtr, ndtri

from kernelcheck._src.verify.random_features.ratio_bias import BiasFit, fit_bias
from kernelcheck._src.verify.unbiased.stats import critical_value, holm, trials_to_detect

__all__ = ["AsymptoticBias", "asymptotic_bias", "intercept_weights"]


def intercept_weights(ms) -> np.ndarray:
    """``L`` with ``c = L . y`` the intercept of the OLS fit of ``y = c + beta/m + gamma/m^2``.

    With five or more m the fit has a ``delta / m^3`` term too (as :func:`fit_bias`).
    """
    x = 1.0 / np.asarray(ms, dtype=float)
    powers = (0, 1, 2, 3) if x.size >= 5 else (0, 1, 2)
    X = np.stack([x**k for k in powers], axis=1)
    return np.linalg.pinv(X)[0]


class AsymptoticBias(NamedTuple):
    """The judgement of a series of runs (arrays over the flattened output entries)."""

    passed: bool
    intercept: np.ndarray
    intercept_se: np.ndarray
    tolerance: np.ndarray
    z: np.ndarray
    p_value: np.ndarray
    rejected: np.ndarray
    fit: BiasFit
    fit_tested: bool
    fit_rejected: bool
    detectable: np.ndarray
    critical: float
    confirm: float


def asymptotic_bias(
    ms,
    means,
    variances,
    count: int,
    exact,
    tol,
    proj,
    proj_se,
    alpha: float,
    power: float,
    proj_tol=None,
) -> AsymptoticBias:
    """Judge the runs: entrywise tests of the asymptotic bias, the C16 fit, Holm over both.

    ``means``, ``variances`` and ``tol`` have shape (len(ms), P): per m and
    output entry the mean over ``count`` redraws, the sample variance of one
    redraw and the rounding tolerance; ``exact`` has shape (P,); ``proj`` and
    ``proj_se`` are ``<mean - A, u>`` per m and its standard error, ``proj_tol``
    the rounding tolerance of ``<a, u>`` per m: the C16 fit is tested only when
    the projection's spread over redraws exceeds it at every m (outputs that
    vary by rounding alone have no law to fit).
    """
    L = intercept_weights(ms)
    means, variances = np.asarray(means, float), np.asarray(variances, float)
    c = L @ (means - np.asarray(exact, float)[None, :])
    se = np.sqrt((L[:, None] ** 2 * variances).sum(axis=0) / count)
    tolc = np.abs(L) @ np.asarray(tol, float)
    excess = np.maximum(np.abs(c) - tolc, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(se > 0, excess / se, np.where(excess > 0, np.inf, 0.0))
    p = 2.0 * ndtr(-z)
    dof = len(ms) - (3 if len(ms) >= 5 else 2)
    proj_tol = np.zeros(len(ms)) if proj_tol is None else np.asarray(proj_tol, float)
    spread = np.asarray(proj_se, float) * math.sqrt(count)
    fit_tested = bool(dof > 0 and np.all(np.isfinite(spread) & (spread > proj_tol)))
    if fit_tested:
        fit = fit_bias(tuple(ms), tuple(proj), tuple(proj_se), alpha)
    else:  # outputs that do not vary (one key): no law to fit, the entries are judged by rounding
        nan = float("nan")
        fit = BiasFit(True, nan, nan, nan, nan, nan, nan)
    p_all = np.concatenate([p, [fit.gof_p if fit_tested else np.nan]])
    rej = holm(p_all, alpha)
    M = max(int(np.isfinite(p_all).sum()), 1)
    zdet, zpow = critical_value(alpha, M), float(ndtri(power))
    detectable = tolc + (zdet + zpow) * se  # the test sees |c| beyond the rounding tolerance
    worst = int(np.argmax(z))
    confirm = float(trials_to_detect(se[worst] * math.sqrt(count), excess[worst], zdet, zpow))
    return AsymptoticBias(
        passed=not bool(rej.any()),
        intercept=c,
        intercept_se=se,
        tolerance=tolc,
        z=z,
        p_value=p,
        rejected=rej[:-1],
        fit=fit,
        fit_tested=fit_tested,
        fit_rejected=bool(rej[-1]),
        detectable=detectable,
        critical=zdet,
        confirm=max(confirm, float(count)) if math.isfinite(confirm) else float("nan"),
    )
