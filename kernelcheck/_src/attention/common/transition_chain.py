"""From the canonical gradients to a family's inputs: the chain rule and its bound (C22-C24).

Every canonical array of the families is a signed product of their inputs,
broadcast: the delta rule's values ``beta v``, its read ``-beta k``; Gated
DeltaNet's read ``-alpha beta k`` and decays ``alpha``; Kimi Delta
Attention's read ``-beta alpha o k``; the DPLR transition's ``a``, ``b``,
``w``.  A family states them as :class:`Field` records; :func:`chain` then
sends each canonical gradient to the factors of its product
(``d f_j += sign prod_(i != j) f_i dc``, summed over the axes ``f_j`` is
broadcast along), and :func:`chain_bound` bounds the result:

* a factor with the field's channels (``k`` in ``-beta k``) takes the error
  times the largest ``|prod_(i != j) f_i|`` (2-norm over the key channels,
  or entry by entry over the value channels);
* a factor of one value per token (``beta``) sums over the channels: the
  2-norm of the other factors times the 2-norm error (key channels), or
  ``sum_m |coef_m| E_m`` (value channels);
* plus the products' and sums' own roundings, ``gamma_(f + c + 2)`` of the
  absolute terms (f factors, sums over c channels), and the sums of the
  contributions, ``gamma_8``.

The in-layer L2 normalisation ``n(x) = x / s``, ``s = sqrt(|x|^2 + eps)``,
has the Jacobian ``(I - x x^T / s^2) / s`` of norm at most ``1 / s``;
the queries' scale ``c`` multiplies; their roundings add ``gamma_(2 D + 8)``
of ``2 |dn| / s``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from kernelcheck._src.attention.common.transitions import L2NORM_EPS
from kernelcheck._src.core.rounding import gamma

__all__ = ["Field", "chain", "chain_bound", "normalized_grad", "normalized_grad_bound"]


class Field(NamedTuple):
    """A canonical array as ``sign * prod(factors)``: ``name`` one of the canonical fields."""

    name: str  # "v", "read", "write" or "w"
    sign: float
    factors: tuple[str, ...]  # input names: "q", "k", "v" or a per-token input's


def _expand(value: np.ndarray, ndim: int) -> np.ndarray:
    """A per-token value (..., n) as (..., n, 1); arrays with channels unchanged."""
    return value[..., None] if value.ndim == ndim - 1 else value


def _reduce(grad: np.ndarray, like: np.ndarray) -> np.ndarray:
    """``grad`` summed over the axes ``like`` (as given, maybe (..., n)) is broadcast along."""
    if like.ndim == grad.ndim - 1:
        return grad.sum(axis=-1)
    if like.shape[-1] == 1 and grad.shape[-1] != 1:
        return grad.sum(axis=-1, keepdims=True)
    return grad


def chain(fields, values: dict, canonical: dict) -> dict:
    """The gradients of the inputs named in ``fields`` from the canonical ones (module docstring).

    ``values`` maps input names to their arrays, ``canonical`` field names to
    the canonical gradients.  Inputs not in any field get no entry.
    """
    out: dict[str, np.ndarray] = {}
    for field in fields:
        dc = canonical[field.name]
        for j, name in enumerate(field.factors):
            coef = np.full(dc.shape, field.sign)
            for i, other in enumerate(field.factors):
                if i != j:
                    coef = coef * _expand(values[other], dc.ndim)
            g = _reduce(coef * dc, values[name])
            out[name] = out.get(name, 0.0) + g
    return out


def chain_bound(fields, values: dict, canonical: dict, errors: dict, dt) -> dict:
    """Bounds on :func:`chain`'s results from the canonical gradients' ``errors`` (see the module).

    ``errors[field]`` is (..., n) (the 2-norm over the key channels) for a
    field with key channels, (..., n, d_v) (entry by entry) for the values.
    Returns, per input, a bound of the same kind: (..., n) for an input with
    key channels (its 2-norm) or one value per token, (..., n, d_v) for ``v``.
    """
    out: dict[str, np.ndarray] = {}
    for field in fields:
        dc, E = canonical[field.name], errors[field.name]
        entrywise = E.ndim == dc.ndim
        c = dc.shape[-1]
        g = gamma(len(field.factors) + c + 2, dt)
        for j, name in enumerate(field.factors):
            coef = np.ones(dc.shape)
            for i, other in enumerate(field.factors):
                if i != j:
                    coef = coef * np.abs(_expand(values[other], dc.ndim))
            own = values[name]
            per_token = own.ndim == dc.ndim - 1 or own.shape[-1] == 1
            if entrywise:
                err = np.sum(coef * E, -1) if per_token else coef * E
            elif per_token:
                err = np.sqrt(np.sum(coef * coef, axis=-1)) * E
            else:
                err = np.max(coef, axis=-1) * E
            rounding = np.abs(_reduce(coef * np.abs(dc), own))
            if not entrywise and not per_token:
                rounding = np.sqrt(np.sum(rounding * rounding, axis=-1))
            err = err + g * (rounding if rounding.shape == err.shape else rounding[..., 0])
            out[name] = out.get(name, 0.0) + err
    return {name: e * (1.0 + gamma(8, dt)) for name, e in out.items()}


def normalized_grad(x: np.ndarray, dn: np.ndarray, eps: float = L2NORM_EPS) -> np.ndarray:
    """The gradient through ``n(x) = x / sqrt(|x|^2 + eps)``: ``(dn - x (x . dn) / s^2) / s``."""
    s2 = np.sum(x * x, axis=-1, keepdims=True) + eps
    s = np.sqrt(s2)
    return (dn - x * (np.sum(x * dn, axis=-1, keepdims=True) / s2)) / s


def normalized_grad_bound(x: np.ndarray, dn: np.ndarray, E: np.ndarray, dt) -> np.ndarray:
    """Bound (2-norm) through the normalisation: ``(E + gamma_(2D+8) 2 |dn|) / s``."""
    s = np.sqrt(np.sum(x * x, axis=-1) + L2NORM_EPS)
    dnorm = np.sqrt(np.sum(dn * dn, axis=-1))
    return (E + gamma(2 * x.shape[-1] + 8, dt) * 2.0 * dnorm) / s * (1.0 + gamma(4, dt))
