"""kernelcheck: numerical verification of the mathematics of linear attention.

The essay "Linear Attention from first principles" derives linear attention from
kernel theory; kernelcheck turns each of its claims (C1..C24, see the docs) into
code that decides it numerically, with evidence:

* :mod:`kernelcheck.kernels` -- kernels as immutable values with an algebra and
  exact feature maps where the feature space is finite;
* :mod:`kernelcheck.features` -- exact and random feature maps;
* :mod:`kernelcheck.psd` -- positive semi-definiteness verdicts (C5, C6);
* :mod:`kernelcheck.attention` -- attention in exact, parallel, recurrent and
  chunked forms (C1, C10-C15);
* :mod:`kernelcheck.stats` -- Monte Carlo engine for random-feature estimators;
* :mod:`kernelcheck.verify`, :mod:`kernelcheck.testing`,
  :mod:`kernelcheck.strategies` -- what other projects call.

The most used names (the kernels and the PSD verdict) are available here too.
Submodules and names load on first use, as in SciPy: ``import kernelcheck``
itself imports nothing heavy (no NumPy), so a project's start-up pays only
for what it uses.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from kernelcheck._src.core.version import __version__ as __version__
from kernelcheck.errors import InvalidArgument

#: Submodules, imported on first access (``kernelcheck.verify``).
_SUBMODULES = (
    "attention",
    "claims",
    "distributed",
    "errors",
    "features",
    "kernels",
    "psd",
    "scaling",
    "stats",
    "strategies",
    "testing",
    "verify",
)

#: Names re-exported from a submodule, imported on first access.
_NAMES = {
    "Kernel": "kernels",
    "Linear": "kernels",
    "Constant": "kernels",
    "Polynomial": "kernels",
    "Exponential": "kernels",
    "Gaussian": "kernels",
    "Laplacian": "kernels",
    "FunctionKernel": "kernels",
    "kernel_from_function": "kernels",
    "Sum": "kernels",
    "Scaled": "kernels",
    "Product": "kernels",
    "Power": "kernels",
    "Exp": "kernels",
    "exp": "kernels",
    "monomial_dim": "kernels",
    "unweighted_monomials": "kernels",
    "check_psd": "psd",
    "PSDResult": "psd",
    "Verdict": "psd",
    "mercer_features": "psd",
    "MercerFeatures": "psd",
    "Nystrom": "psd",
}

__all__ = [
    "InvalidArgument",
    "attention",
    "claims",
    "distributed",
    "errors",
    "features",
    "kernels",
    "psd",
    "scaling",
    "stats",
    "strategies",
    "testing",
    "verify",
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
    "check_psd",
    "PSDResult",
    "Verdict",
    "mercer_features",
    "MercerFeatures",
    "Nystrom",
]


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"kernelcheck.{name}")
    if name in _NAMES:
        value = getattr(importlib.import_module(f"kernelcheck.{_NAMES[name]}"), name)
        globals()[name] = value  # later accesses skip this function
        return value
    raise AttributeError(f"module 'kernelcheck' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # the names as static analysis sees them
    from kernelcheck import (
        attention,
        claims,
        distributed,
        errors,
        features,
        kernels,
        psd,
        scaling,
        stats,
        strategies,
        testing,
        verify,
    )
    from kernelcheck.kernels import (
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
    from kernelcheck.psd import (
        MercerFeatures,
        Nystrom,
        PSDResult,
        Verdict,
        check_psd,
        mercer_features,
    )
