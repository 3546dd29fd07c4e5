"""The example objects the claim checks run on: kernels, non-kernels and feature maps.

One home for every list of examples of the claims registry, so a check reads
its examples from here and a new example is added in one place.  Kernels are
immutable values, so the lists are built once at import.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from kernelcheck._src.features.random import PositiveRandomFeatures
from kernelcheck._src.kernels.base import Kernel
from kernelcheck._src.kernels.combinators import exp
from kernelcheck._src.kernels.leaves import (
    Constant,
    Exponential,
    Gaussian,
    Laplacian,
    Linear,
    Polynomial,
)

__all__ = [
    "FINITE_KERNELS",
    "PSD_KERNELS",
    "NON_KERNELS",
    "FACTORIZED_KERNELS",
    "recurrence_feature_maps",
]

#: Kernels with finite feature spaces (C4): leaves and every combinator.
FINITE_KERNELS: tuple[Kernel, ...] = (
    Linear(),
    Constant(2.0),
    Polynomial(2),
    Polynomial(3, c=1.0),
    0.5 * Polynomial(2) + Linear(),
    Linear() * Polynomial(2, c=0.5),
    Linear() ** 3,
    exp(Linear(), order=3),
    exp(0.5 * Linear(), order=4) + Constant(1.0),
)

#: (name, kernel, (n, d, scale) of its points): true kernels with finite and
#: infinite feature spaces (C5, C6).
PSD_KERNELS: tuple[tuple[str, Kernel, tuple[int, int, float]], ...] = (
    ("Linear, n > d (rank deficient)", Linear(), (40, 3, 1.0)),
    ("Polynomial(3, c=1)", Polynomial(3, c=1.0), (40, 4, 0.6)),
    ("Exponential()", Exponential(), (40, 4, 0.6)),
    ("Gaussian(2)", Gaussian(lengthscale=2.0), (60, 3, 1.0)),
    ("Laplacian()", Laplacian(), (60, 3, 1.0)),
    ("Gaussian(1) * Polynomial(2, c=1)", Gaussian() * Polynomial(2, c=1.0), (40, 3, 1.0)),
    (
        "exp(Linear(), order=3) + 0.5 Laplacian()",
        exp(Linear(), order=3) + 0.5 * Laplacian(),
        (40, 3, 0.8),
    ),
)

#: (name, f(x, y)): symmetric functions that are not kernels (C5 refutes them).
NON_KERNELS: tuple[tuple[str, Callable[[Any, Any], Any]], ...] = (
    ("tanh(x.y - 1)", lambda x, y: np.tanh(x @ y - 1.0)),
    ("-||x - y||", lambda x, y: -np.linalg.norm(x - y)),
    ("cos(x.y)", lambda x, y: np.cos(x @ y)),
    ("exp(-||x - y||^4)", lambda x, y: np.exp(-(np.linalg.norm(x - y) ** 4))),
)

#: Kernels whose kernelized attention is compared with the factorized form (C10).
FACTORIZED_KERNELS: tuple[Kernel, ...] = (
    exp(Linear(), order=2),
    Polynomial(2, c=1.0),
    exp(0.5 * Linear(), order=4) + Constant(0.5),
    Linear() ** 2 + Constant(1.0),
)


def recurrence_feature_maps(d: int) -> list[tuple[str, Any]]:
    """(name, feature map on ``d`` inputs) run through the recurrence (C14)."""
    return [
        ("Taylor order 2", exp(Linear(), order=2).features()),
        ("positive random features", PositiveRandomFeatures(d, 32, seed=14)),
    ]
