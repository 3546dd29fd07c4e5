"""The ratio-bias fit's goodness of fit is the chi-square survival function.

``fit_bias`` calls ``scipy.special.chdtrc`` instead of ``scipy.stats.chi2.sf``
(to keep scipy.stats out of the quick essay's imports); both evaluate the
regularised upper incomplete gamma function Q(k/2, x/2).  The test recomputes
the residuals by least squares, while ``fit_bias`` solves the normal
equations, whose rounding is about cond(X)^2 u (cond(X) is below 1e3 for these
m): 1e-9 relative covers that.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from kernelcheck._src.verify.random_features.ratio_bias import fit_bias


@pytest.mark.parametrize("n_m", [4, 5, 6])
def test_gof_p_is_chi2_sf_of_the_weighted_residuals(n_m):
    rng = np.random.default_rng(n_m)
    ms = tuple(float(m) for m in 2 ** np.arange(4, 4 + n_m))
    se = tuple(0.01 * (1 + rng.random(n_m)))
    proj = tuple(0.3 / m + 0.1 / m**2 + s * rng.standard_normal() for m, s in zip(ms, se))
    fit = fit_bias(ms, proj, se, 0.01)
    m = np.array(ms)
    powers = (1, 2, 3) if n_m >= 5 else (1, 2)
    X = np.stack([m ** -float(k) for k in powers], axis=1)
    w = 1.0 / np.array(se) ** 2
    coef = np.linalg.lstsq(X * np.sqrt(w)[:, None], np.array(proj) * np.sqrt(w), rcond=None)[0]
    chi = float((w * (np.array(proj) - X @ coef) ** 2).sum())
    expected = stats.chi2.sf(chi, n_m - len(powers))
    assert fit.gof_p == pytest.approx(expected, rel=1e-9)
