"""Coverage of the bootstrap interval of :func:`kernelcheck.scaling.fit_exponent` (C2, C3).

A 95% interval must contain the true exponent in at least 95% of repeated
experiments.  The percentile bootstrap of the per-size *median* does (about
99% in the simulation below: conservative); the bootstrap of the per-size
*minimum* covers only 86-92% (a minimum's resamples can never go below the
observed minimum, so the interval is too narrow on one side), and
``fit_exponent`` refuses it rather than labelling it 95%.

Statistics: R = 200 seeded experiments, 7 sizes a sqrt(2) apart, 5 repeats
with lognormal noise (sd 0.1).  With true coverage 0.95, the count of covering
intervals is Binomial(200, 0.95): P(count < 181) = 0.3% (the threshold
0.905 R), the false-alarm rate of the first test.  The second replays the
refused method on 400 experiments: a 95% interval would give fewer than 368
covering intervals with probability 0.7% (its false-alarm rate), a 90% one
(what the minimum gives) with probability 0.90 (its power).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from kernelcheck.errors import InvalidArgument
from kernelcheck.scaling import fit_exponent

SIZES = np.array([256, 362, 512, 724, 1024, 1448, 2048])
P_TRUE = 2.0


def _experiments(count, repeats, seed):
    rng = np.random.default_rng(seed)
    noise = np.exp(rng.normal(0.0, 0.1, (count, len(SIZES), repeats)))
    return 1e-9 * SIZES[None, :, None] ** P_TRUE * noise


def test_median_bootstrap_covers_at_its_level():
    R = 200
    threshold = int(0.905 * R)
    assert binom.cdf(threshold - 1, R, 0.95) < 0.005  # the false-alarm rate stated above
    vals = _experiments(R, 5, seed=11)
    covered = sum(
        fit_exponent(
            SIZES, v, method="bootstrap", statistic="median", seed=i, n_resamples=500
        ).contains(P_TRUE)
        for i, v in enumerate(vals)
    )
    assert covered >= threshold, covered


def _percentile_interval_of_min(v, rng, n_resamples=500):
    """The interval the refused method would give: percentile bootstrap of the min's slope."""
    x = np.log(SIZES.astype(float))
    k, r = v.shape
    idx = rng.integers(0, r, size=(n_resamples, k, r))
    y = np.log(np.take_along_axis(np.broadcast_to(v, (n_resamples, k, r)), idx, axis=2)).min(2)
    i, j = np.triu_indices(k, 1)
    slopes = np.median((y[:, j] - y[:, i]) / (x[j] - x[i]), axis=1)
    return np.quantile(slopes, [0.025, 0.975])


def test_the_bootstrap_of_a_minimum_undercovers_and_is_refused():
    R = 400
    rng = np.random.default_rng(5)
    vals = _experiments(R, 5, seed=12)
    covered = 0
    for v in vals:
        lo, hi = _percentile_interval_of_min(v, rng)
        slope = fit_exponent(SIZES, v, statistic="min").slope
        covered += min(lo, slope) <= P_TRUE <= max(hi, slope)
    # Binomial(400, 0.95) is at most 0.92 R with probability 0.7%: the minimum is short of 95%
    assert binom.cdf(int(0.92 * R), R, 0.95) < 0.01
    assert covered <= 0.92 * R, covered
    with pytest.raises(InvalidArgument, match="bootstrap of a minimum"):
        fit_exponent(SIZES, vals[0], method="bootstrap", statistic="min", seed=0)
