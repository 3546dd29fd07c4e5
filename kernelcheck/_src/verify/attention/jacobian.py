"""Gradients through a feature map: the reference dQ, dK of a linear-type layer (claims C10, C14).

A layer on feature maps computes ``dQ = J_q^T dphi_q`` with ``J_q`` the
Jacobian of its feature map at each query.  The family's reference gives
``dphi_q`` with its bound; this module takes the feature map's per-row
Jacobians in float64 from a framework's automatic differentiation (PyTorch's
``torch.func``, else JAX's), when the map is written in that framework's
operations, or by the complex step ``J e_a = Im phi(x + i h e_a) / h`` when
the map is a NumPy formula that carries complex numbers (an analytic map:
accurate to a few ulp, no cancellation), checked against central
differences so a non-analytic piece (``abs``, a cast to float) cannot slip
in; and carries the reference and its bound through them.  A map none of
these can differentiate has no Jacobian here: its dQ and dK are then
reported as not checked, never as passed.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable

import numpy as np

from kernelcheck._src.core.rounding import gamma

__all__ = ["feature_jacobians", "through_features"]


def feature_jacobians(phi: Callable | None, X: np.ndarray) -> np.ndarray | None:
    """``d phi(x) / dx`` at every row of ``X``, shape ``X.shape[:-1] + (D, d)``, float64.

    ``phi`` None is the identity map (its Jacobian the identity).  The
    Jacobians come from PyTorch (``torch.func.vmap(torch.func.jacrev)``) or
    JAX (``jax.vmap(jax.jacrev)``), whichever is already imported and can
    evaluate ``phi`` on its float64 arrays to the same features as NumPy's
    evaluation; None when neither can (a map written in NumPy operations).

    Parameters
    ----------
    phi : callable or None
        The feature map, applied to arrays of shape (rows, d).
    X : numpy.ndarray
        The inputs, shape (..., n, d), float64.

    Returns
    -------
    numpy.ndarray or None
    """
    d = X.shape[-1]
    if phi is None:
        return np.broadcast_to(np.eye(d), X.shape[:-1] + (d, d))
    flat = np.array(X.reshape(-1, d), dtype=np.float64)
    for take in (_torch_jacobians, _jax_jacobians, _complex_step_jacobians):
        with warnings.catch_warnings():  # a NumPy map handed framework arrays may warn
            warnings.simplefilter("ignore")
            J = take(phi, flat)
        if J is not None and J.ndim == 3 and J.shape[0] == flat.shape[0] and J.shape[2] == d:
            if np.isfinite(J).all():
                return J.reshape(X.shape[:-1] + J.shape[1:])
    return None


def _torch_jacobians(phi: Callable, flat: np.ndarray) -> np.ndarray | None:
    if "torch" not in sys.modules:
        return None
    import torch

    try:
        x = torch.tensor(flat, dtype=torch.float64)

        def row(v):
            out = phi(v[None, :])
            if not isinstance(out, torch.Tensor):
                raise TypeError("not a torch map")
            return out[0]

        with torch.no_grad():
            values = phi(x.clone())
        if not isinstance(values, torch.Tensor) or not _same(values.numpy(), phi, flat):
            return None
        return torch.func.vmap(torch.func.jacrev(row))(x).detach().numpy()
    except Exception:  # noqa: BLE001 - the map is not written in torch operations
        return None


def _jax_jacobians(phi: Callable, flat: np.ndarray) -> np.ndarray | None:
    if "jax" not in sys.modules:
        return None
    import jax
    import jax.numpy as jnp

    try:
        with jax.enable_x64(True):
            x = jnp.asarray(flat, dtype=jnp.float64)
            values = phi(x)
            if not isinstance(values, jax.Array) or not _same(np.asarray(values), phi, flat):
                return None
            J = jax.vmap(jax.jacrev(lambda v: phi(v[None, :])[0]))(x)
            return np.asarray(J, dtype=np.float64)
    except Exception:  # noqa: BLE001 - the map is not written in jax operations
        return None


#: The complex step's imaginary increment: far below any input's ulp, far above underflow.
_STEP = 1e-100


def _complex_step_jacobians(phi: Callable, flat: np.ndarray) -> np.ndarray | None:
    """``Im phi(x + i h e_a) / h`` for every input coordinate a, checked by central differences.

    For a map analytic in each coordinate the complex step has no
    subtractive cancellation: each entry is accurate to the roundings of the
    map's own evaluation.  Central differences with step ``s = 1e-5 (1 +
    |x|)`` (error ``s^2 |phi'''| / 6 + u |phi| / s``, about 1e-10 relative)
    must agree to ``1e-4 (|J| + |phi| + 1)``: a piece that is not analytic
    (``abs``, ``sqrt`` at 0, a cast to float64 that drops the imaginary part)
    gives derivatives wrong by their own size and is refused.
    """
    N, d = flat.shape
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("error", np.exceptions.ComplexWarning)
            base = np.asarray(phi(flat.copy()), dtype=np.float64)
            if base.ndim != 2 or base.shape[0] != N:
                return None
            J = np.empty((N, base.shape[1], d))
            for a in range(d):
                X = flat.astype(np.complex128)
                X[:, a] += 1j * _STEP
                F = np.asarray(phi(X))
                # complex elementary functions may differ from the real ones by an ulp or two
                if F.dtype.kind != "c" or F.shape != base.shape or not _close(F.real, base):
                    return None
                J[:, :, a] = F.imag / _STEP
                if not _differences_agree(phi, flat, a, J[:, :, a], base):
                    return None
    except Exception:  # noqa: BLE001 - a map that does not carry complex numbers
        return None
    return J


#: Rows on which central differences check the complex step (a piece that is not
#: analytic, such as ``abs``, is wrong at almost every row, so a sample finds it).
_CHECKED_ROWS = 64


def _differences_agree(phi: Callable, flat: np.ndarray, a: int, Ja: np.ndarray, base) -> bool:
    """Central differences in coordinate ``a`` agree with ``Ja`` to ``1e-4 (|J| + |phi| + 1)``.

    On the first :data:`_CHECKED_ROWS` rows.
    """
    rows = slice(0, _CHECKED_ROWS)
    flat, Ja, base = flat[rows], Ja[rows], base[rows]
    s = 1e-5 * (1.0 + np.abs(flat[:, a]))
    up, down = flat.copy(), flat.copy()
    up[:, a] += s
    down[:, a] -= s
    diff = np.asarray(phi(up), np.float64) - np.asarray(phi(down), np.float64)
    fd = diff / (2 * s[:, None])
    return bool(np.all(np.abs(fd - Ja) <= 1e-4 * (np.abs(Ja) + np.abs(base) + 1)))


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal to 64 ulp of float64 (two evaluations of one formula by different libraries)."""
    return bool(np.all(np.abs(a - b) <= 64 * np.finfo(np.float64).eps * (np.abs(b) + 1e-300)))


def _same(values: np.ndarray, phi: Callable, flat: np.ndarray) -> bool:
    """Whether the framework's features are NumPy's (the same function), to a few ulp."""
    try:
        ref = np.asarray(phi(flat.copy()), dtype=np.float64)
    except Exception:  # noqa: BLE001 - a map NumPy cannot evaluate is the framework's alone
        return values.dtype == np.float64
    return ref.shape == values.shape and _close(values, ref)


def through_features(J: np.ndarray, ref: np.ndarray, tol: np.ndarray, model, ops: int):
    """The reference ``dX = J^T dphi`` and its tolerance from ``dphi``'s, row by row.

    The layer's ``J^T dphi`` has entries that are sums of ``D`` products of
    its Jacobian (each entry ``ops`` roundings from the exact one, ``ops``
    the feature map's roundings) and its ``dphi`` (within ``tol`` of the
    reference): ``|dX - J^T dphi_ref| <= |J|^T tol (1 + c) + c |J|^T |dphi_ref|``,
    ``c = gamma_(D + ops)`` in the layer's model, plus the same in float64 for
    the reference's own product.

    Parameters
    ----------
    J : numpy.ndarray, shape (..., n, D, d)
        The feature map's Jacobians.
    ref, tol : numpy.ndarray, shape (..., n, D)
        The reference gradient with respect to the features and its tolerance.
    model : RoundingModel
        The layer's rounding model.
    ops : int
        Roundings of one feature entry (and of its derivative).

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        The reference ``dX`` and its tolerance, shape (..., n, d).
    """
    D = J.shape[-2]
    c = gamma(D + ops, model) + gamma(D + ops)
    absJ = np.abs(J)
    out = np.einsum("...ij,...i->...j", J, ref)
    room = np.einsum("...ij,...i->...j", absJ, tol) * (1.0 + c)
    room = room + c * np.einsum("...ij,...i->...j", absJ, np.abs(ref))
    return out, room
