"""The catalogue of kernel leaves: one row per built-in leaf, read by everything that lists them.

The expression parser (:mod:`~kernelcheck._src.kernels.expr`, behind
``kernelcheck kernel EXPR``), the Hypothesis strategies
(:func:`kernelcheck.strategies.kernels`) and the command-line help read
:data:`LEAVES`; none of them lists the leaves itself.  Adding a leaf is one
class (in :mod:`~kernelcheck._src.kernels.leaves`) and one row here.

A row names the leaf in the text language, gives its class and a one-line
description, says whether the leaf has an exact finite feature map, and
describes each constructor argument: how the parser reads it (a real
number or an integer) and a few valid values the strategies draw from.  The
arguments themselves (their names, order and defaults) are read from the
constructor's signature, so they are written once, in the class.

:class:`~kernelcheck._src.kernels.function.FunctionKernel` is a leaf too, but
it wraps a user's function: it has no text form and no row.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

from kernelcheck._src.kernels.base import Kernel
from kernelcheck._src.kernels.leaves import (
    Constant,
    Exponential,
    Gaussian,
    Laplacian,
    Linear,
    Polynomial,
)

__all__ = ["LeafParam", "Leaf", "LEAVES", "REQUIRED", "KINDS"]

#: The default of an argument that has none (the parser then requires it).
REQUIRED: Any = inspect.Parameter.empty

#: How the text language reads an argument: a real number, or an integer.
KINDS = ("number", "int")


@dataclass(frozen=True)
class LeafParam:
    """One constructor argument of a leaf.

    Attributes
    ----------
    name : str
        The constructor's keyword (``degree``, ``c``, ``lengthscale``, ...).
    kind : {"number", "int"}
        How the expression parser reads it.
    draws : tuple or range
        Valid values the Hypothesis strategies draw from: a ``range`` of
        integers (drawn with ``st.integers``) or a tuple of values (drawn
        with ``st.sampled_from``).
    default : object
        The constructor's default, or :data:`REQUIRED`.
    """

    name: str
    kind: str
    draws: tuple | range
    default: Any = REQUIRED


@dataclass(frozen=True)
class Leaf:
    """One built-in kernel leaf, as the parser, the strategies and the help know it.

    Attributes
    ----------
    name : str
        The name messages use for the leaf (``poly``).
    spellings : tuple of str
        Every name the expression language accepts for it, in the order the
        help and the messages list them (``("poly", "polynomial")``).
    cls : type
        The leaf's class; ``cls(**{p.name: value})`` builds it.
    params : tuple of LeafParam
        Its constructor arguments, in signature order.
    summary : str
        A one-line description (the kernel's formula and its claim).
    finite_features : bool
        Every leaf built from the drawn values has an exact finite feature map.
    """

    name: str
    spellings: tuple[str, ...]
    cls: type[Kernel]
    params: tuple[LeafParam, ...]
    summary: str
    finite_features: bool

    def usage(self) -> str:
        """How the leaf is written in an expression: ``poly(degree, c=0)``."""
        args = [
            p.name if p.default is REQUIRED else f"{p.name}={_short(p.default)}"
            for p in self.params
        ]
        return f"{self.spellings[0]}({', '.join(args)})" if args else self.spellings[0]


def _short(value: Any) -> str:
    """A default as the help prints it: ``0`` for ``0.0``, ``None``, ``0.5``."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return repr(value)


def _leaf(
    name: str,
    cls: type[Kernel],
    summary: str,
    *,
    finite_features: bool,
    spellings: tuple[str, ...] | None = None,
    **params: tuple[str, tuple | range],
) -> Leaf:
    """A row: ``params`` maps each constructor argument to ``(kind, draws)``.

    The argument names, order and defaults come from ``cls``'s signature; a
    mismatch between ``params`` and the signature is an error at import.
    """
    signature = inspect.signature(cls).parameters
    if set(signature) != set(params):
        raise TypeError(
            f"the row of {cls.__name__} describes {sorted(params)}, not {list(signature)}"
        )
    rows = []
    for pname, arg in signature.items():
        kind, draws = params[pname]
        if kind not in KINDS:
            raise TypeError(f"argument {pname!r} of {cls.__name__}: kind {kind!r} not in {KINDS}")
        rows.append(LeafParam(pname, kind, draws, arg.default))
    return Leaf(name, spellings or (name,), cls, tuple(rows), summary, finite_features)


_LENGTHSCALES = (0.25, 0.5, 1.0, 2.0)

#: The built-in leaves, in the order the help lists them (finite ones first).
LEAVES: tuple[Leaf, ...] = (
    _leaf("linear", Linear, "x.y (claim C7)", finite_features=True),
    _leaf(
        "constant",
        Constant,
        "the constant c",
        finite_features=True,
        spellings=("const", "constant"),
        c=("number", (0.25, 0.5, 1.0, 2.0)),
    ),
    _leaf(
        "poly",
        Polynomial,
        "(x.y + c)^degree (claim C8)",
        finite_features=True,
        spellings=("poly", "polynomial"),
        degree=("int", range(0, 4)),
        c=("number", (0.0, 0.5, 1.0)),
    ),
    _leaf(
        "exponential",
        Exponential,
        "exp(scale x.y) (claims C9, C10)",
        finite_features=False,
        scale=("number", (0.25, 0.5, 1.0)),
    ),
    _leaf(
        "gaussian",
        Gaussian,
        "exp(-||x-y||^2 / (2 lengthscale^2))",
        finite_features=False,
        spellings=("gaussian", "rbf"),
        lengthscale=("number", _LENGTHSCALES),
    ),
    _leaf(
        "laplacian",
        Laplacian,
        "exp(-||x-y|| / lengthscale)",
        finite_features=False,
        lengthscale=("number", _LENGTHSCALES),
    ),
)
