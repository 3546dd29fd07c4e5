"""Kernels as immutable values with an algebra (claims C4, C7, C8, C9, C12).

The nodes live in ``kernelcheck/_src/kernels/``: the base class in ``base``,
the leaves in ``leaves`` (listed in the catalogue ``catalog``), user-function
kernels in ``function``, the combinators in ``combinators`` and the monomial
maps in ``monomials``; each node's docstring states its error model.

Examples
--------
>>> import numpy as np
>>> from kernelcheck.kernels import Linear, Polynomial, exp
>>> k = exp(Linear(), order=3) + 0.5 * Polynomial(2)
>>> k
exp(Linear(), order=3) + 0.5 * Polynomial(2)
>>> X = np.random.default_rng(0).normal(size=(5, 3))
>>> phi = k.features()
>>> bool(np.allclose(phi(X) @ phi(X).T, k(X)))
True
"""

from kernelcheck._src.kernels.base import Kernel
from kernelcheck._src.kernels.combinators import Exp, Power, Product, Scaled, Sum, exp
from kernelcheck._src.kernels.function import FunctionKernel, kernel_from_function
from kernelcheck._src.kernels.leaves import (
    Constant,
    Exponential,
    Gaussian,
    Laplacian,
    Linear,
    Polynomial,
)
from kernelcheck._src.kernels.monomials import monomial_dim, unweighted_monomials

__all__ = [
    "Kernel",
    "Linear",
    "Constant",
    "Polynomial",
    "Exponential",
    "Gaussian",
    "Laplacian",
    "FunctionKernel",
    "kernel_from_function",
    "Sum",
    "Scaled",
    "Product",
    "Power",
    "Exp",
    "exp",
    "monomial_dim",
    "unweighted_monomials",
]
