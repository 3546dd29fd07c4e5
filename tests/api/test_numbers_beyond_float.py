"""Numbers beyond float64 given to the public calls are refused by name, never an OverflowError.

Every public number argument of kernels, features, psd and stats given an
integer of 401 digits: ``InvalidArgument`` naming the argument; a count that
size is a size refusal saying how much memory it would need.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck import psd, stats
from kernelcheck.errors import InvalidArgument
from kernelcheck.features import (
    OptimalPositiveRandomFeatures,
    PositiveRandomFeatures,
    optimal_positive_parameter,
)
from kernelcheck.kernels import (
    Constant,
    Exponential,
    Gaussian,
    Laplacian,
    Linear,
    Polynomial,
)

RNG = np.random.default_rng(17)
X = RNG.normal(size=(4, 3))
G = X @ X.T + np.eye(4)

#: An integer beyond float64 (``float(BEYOND_FLOAT)`` raises OverflowError).
BEYOND_FLOAT = 10**400
_TOO_BIG = r"must be finite in float64 \(at most about 1.8e308\), got a number of 401 digits"

#: every public number argument of kernels, features, psd and stats given BEYOND_FLOAT:
#: refused naming the argument, never an OverflowError; a count that size is a size
#: refusal saying how much memory it would need
BEYOND_FLOAT_CALLS = {
    "Constant": (lambda: Constant(BEYOND_FLOAT), f"^`c` {_TOO_BIG}"),
    "Polynomial-c": (lambda: Polynomial(2, c=BEYOND_FLOAT), f"^`c` {_TOO_BIG}"),
    "Exponential": (lambda: Exponential(BEYOND_FLOAT), f"^`scale` {_TOO_BIG}"),
    "Gaussian": (lambda: Gaussian(BEYOND_FLOAT), f"^`lengthscale` {_TOO_BIG}"),
    "Laplacian": (lambda: Laplacian(BEYOND_FLOAT), f"^`lengthscale` {_TOO_BIG}"),
    "scaled-left": (lambda: BEYOND_FLOAT * Linear(), f"^`other` {_TOO_BIG}"),
    "scaled-right": (lambda: Linear() * BEYOND_FLOAT, f"^`other` {_TOO_BIG}"),
    "sum": (lambda: Linear() + BEYOND_FLOAT, f"^`other` {_TOO_BIG}"),
    "random-features-scale": (
        lambda: PositiveRandomFeatures(2, 4, seed=0, scale=BEYOND_FLOAT),
        f"^`scale` {_TOO_BIG}",
    ),
    "random-features-dim": (
        lambda: PositiveRandomFeatures(BEYOND_FLOAT, 4, seed=0),
        # 8 bytes x 4 * 10^400 entries / 2^30 = 2.98 * 10^392 GiB
        r"^the projection would need 4\d{400} entries \(about 10\^392 GiB\)",
    ),
    "optimal-A": (
        lambda: OptimalPositiveRandomFeatures(2, 4, seed=0, A=BEYOND_FLOAT),
        f"^`A` {_TOO_BIG}",
    ),
    "optimal-sq_norm": (
        lambda: OptimalPositiveRandomFeatures(2, 4, seed=0, sq_norm=BEYOND_FLOAT),
        f"^`sq_norm` {_TOO_BIG}",
    ),
    "optimal_positive_parameter": (
        lambda: optimal_positive_parameter(BEYOND_FLOAT, 2),
        f"^`sq_norm` {_TOO_BIG}",
    ),
    "check_psd-tol": (lambda: psd.check_psd(G, tol=BEYOND_FLOAT), f"^`tol` {_TOO_BIG}"),
    "mercer-tol": (lambda: psd.mercer_features(G, tol=BEYOND_FLOAT), f"^`tol` {_TOO_BIG}"),
    "nystrom-tol": (lambda: psd.Nystrom(Linear(), X, tol=BEYOND_FLOAT), f"^`tol` {_TOO_BIG}"),
    "trials_needed": (lambda: stats.trials_needed(1.0, BEYOND_FLOAT), f"^`tolerance` {_TOO_BIG}"),
    "confidence_interval": (
        lambda: stats.Moments.from_samples(X).confidence_interval(BEYOND_FLOAT),
        f"^`alpha` {_TOO_BIG}",
    ),
    "run_trials": (
        lambda: stats.run_trials(lambda rng, c: rng.normal(size=(c, 1)), BEYOND_FLOAT, seed=0),
        r"^the schedule of 1\d{400} trials .* would need .* \(about 10\^",
    ),
}


@pytest.mark.parametrize("name", sorted(BEYOND_FLOAT_CALLS))
def test_a_number_beyond_float64_is_refused_by_name(name):
    call, message = BEYOND_FLOAT_CALLS[name]
    with pytest.raises(InvalidArgument, match=message):
        call()
