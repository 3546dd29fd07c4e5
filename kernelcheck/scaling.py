"""Measured complexity of attention: exponents with intervals (claims C2, C3, C11).

:func:`measure` times a function over a grid of sizes (warm-up, then rounds
that time every size once in a random order, a robust per-size statistic)
and records its peak memory in a separate :mod:`tracemalloc` pass;
:func:`fit_exponent` fits ``value ~ c n^p`` on the log-log scale with
Theil-Sen and gives a confidence interval for p (Sen's, a bootstrap, or the
median of per-round slopes); :func:`accepted_range` is the timing error
model that judges a measured exponent against an operation count;
:func:`run_scaling` measures softmax against linear attention and puts the
clock next to each form's cost model.

Examples
--------
>>> import numpy as np
>>> from kernelcheck.scaling import fit_exponent, geometric_sizes
>>> n = np.array(geometric_sizes(1024, 8192))
>>> fit = fit_exponent(n, 2e-9 * n**2, expected=(1.8, 2.2))
>>> fit.verdict
'pass'
"""

from kernelcheck._src.scaling.experiment import run_scaling
from kernelcheck._src.scaling.fit import FIT_METHODS, STATISTICS, ExponentFit, fit_exponent
from kernelcheck._src.scaling.forms import (
    DEFAULT_FORMS,
    DEFAULT_SIZES,
    EXPECTED_EXPONENTS,
    QUICK_SIZES,
    SCALING_FORMS,
)
from kernelcheck._src.scaling.judge import (
    COST_SPREAD,
    MIN_SIZE_RATIO,
    MIN_SIZES,
    AcceptedRange,
    accepted_range,
)
from kernelcheck._src.scaling.measure import (
    CLOCKS,
    ORDERS,
    Measurement,
    measure,
    plot_measurements,
)
from kernelcheck._src.scaling.results import FormScaling, ScalingReport
from kernelcheck._src.scaling.sizes import geometric_sizes

__all__ = [
    "measure",
    "fit_exponent",
    "geometric_sizes",
    "accepted_range",
    "run_scaling",
    "plot_measurements",
    "Measurement",
    "ExponentFit",
    "AcceptedRange",
    "FormScaling",
    "ScalingReport",
    "STATISTICS",
    "FIT_METHODS",
    "CLOCKS",
    "ORDERS",
    "COST_SPREAD",
    "MIN_SIZES",
    "MIN_SIZE_RATIO",
    "DEFAULT_SIZES",
    "QUICK_SIZES",
    "EXPECTED_EXPONENTS",
    "SCALING_FORMS",
    "DEFAULT_FORMS",
]
