"""The kernel algebra in one import, for the rooms above that still name this module.

Every name here is defined in one of the modules of the algebra and only
re-exported: :mod:`~kernelcheck._src.kernels.base` (``Kernel``),
:mod:`~kernelcheck._src.kernels.leaves`, :mod:`~kernelcheck._src.kernels.function`,
:mod:`~kernelcheck._src.kernels.combinators` and
:mod:`~kernelcheck._src.kernels.monomials`.  New code imports from those; this
module goes once nothing imports it.
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
from kernelcheck._src.kernels.monomials import (
    monomial_dim,
    unweighted_monomials,
    weighted_monomials,
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
    "weighted_monomials",
    "unweighted_monomials",
]
