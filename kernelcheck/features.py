"""Feature maps: exact maps of finite kernels and random maps of the exponential kernel.

Exact maps come from ``k.features(form)`` (claims C4, C7, C8, C9, C12); the
random maps estimate ``Exponential(scale)`` (claims C13, C17, C18).

Examples
--------
>>> import numpy as np
>>> from kernelcheck.kernels import Linear, exp
>>> phi = exp(Linear(), order=2).features()
>>> phi.output_dim(16)
153
"""

from kernelcheck._src.features.base import RandomFeatureSampler, draw_projection
from kernelcheck._src.features.random import (
    ESTIMATORS,
    HyperbolicRandomFeatures,
    OptimalPositiveRandomFeatures,
    PositiveRandomFeatures,
    TrigonometricRandomFeatures,
    optimal_positive_parameter,
)
from kernelcheck._src.kernels.featuremap import EXACT_MAP_FORMS, ExactFeatureMap, FeatureMap
from kernelcheck._src.kernels.monomials import (
    monomial_dim,
    unweighted_monomials,
    weighted_monomials,
)

__all__ = [
    "FeatureMap",
    "ExactFeatureMap",
    "EXACT_MAP_FORMS",
    "monomial_dim",
    "weighted_monomials",
    "unweighted_monomials",
    "PositiveRandomFeatures",
    "TrigonometricRandomFeatures",
    "HyperbolicRandomFeatures",
    "OptimalPositiveRandomFeatures",
    "RandomFeatureSampler",
    "draw_projection",
    "optimal_positive_parameter",
    "ESTIMATORS",
]
