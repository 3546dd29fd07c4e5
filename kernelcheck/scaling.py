"""Measured complexity of attention: exponents with intervals (claims C2, C3, C11).

:func:`measure` times a function over a grid of sizes (warm-up, repeats, a
robust per-size statistic) and records its peak memory in a separate
:mod:`tracemalloc` pass; :func:`fit_exponent` fits ``value ~ c n^p`` on the
log-log scale with Theil-Sen and gives a confidence interval for p;
:func:`run_scaling` measures softmax against linear attention and puts the
clock next to each form's cost model.  See :mod:`kernelcheck._src.scaling.experiment`.

Examples
--------
>>> import numpy as np
>>> from kernelcheck.scaling import fit_exponent, geometric_sizes
>>> n = np.array(geometric_sizes(1024, 8192))
>>> fit = fit_exponent(n, 2e-9 * n**2, expected=(1.8, 2.2))
>>> fit.verdict
'pass'
"""

from kernelcheck._src.scaling.experiment import (
    CLOCKS,
    DEFAULT_FORMS,
    DEFAULT_SIZES,
    EXPECTED_EXPONENTS,
    FIT_METHODS,
    QUICK_SIZES,
    SCALING_FORMS,
    STATISTICS,
    ExponentFit,
    FormScaling,
    Measurement,
    ScalingReport,
    fit_exponent,
    geometric_sizes,
    measure,
    plot_measurements,
    run_scaling,
)

__all__ = [
    "measure",
    "fit_exponent",
    "geometric_sizes",
    "run_scaling",
    "plot_measurements",
    "Measurement",
    "ExponentFit",
    "FormScaling",
    "ScalingReport",
    "STATISTICS",
    "FIT_METHODS",
    "CLOCKS",
    "DEFAULT_SIZES",
    "QUICK_SIZES",
    "EXPECTED_EXPONENTS",
    "SCALING_FORMS",
    "DEFAULT_FORMS",
]
