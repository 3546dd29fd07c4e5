"""Kernels as immutable values with an algebra (claims C4, C7, C8, C9, C12).

See :mod:`kernelcheck._src.kernels.algebra` for the error model of each node.

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

from kernelcheck._src.kernels.algebra import (
    Constant,
    Exp,
    Exponential,
    FunctionKernel,
    Gaussian,
    Kernel,
    Laplacian,
    Linear,
    Polynomial,
    Power,
    Product,
    Scaled,
    Sum,
    exp,
    kernel_from_function,
    monomial_dim,
    unweighted_monomials,
)

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
