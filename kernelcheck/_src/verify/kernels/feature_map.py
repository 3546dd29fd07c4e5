"""``verify.feature_map``: does a feature map reproduce its kernel? (claims C4, C7, C8, C9, C12)

The check compares two independent computations entrywise: the kernel's Gram
block ``k(X, Y)`` and the inner products ``phi(X) @ phi(Y).T``, against the
sum of the two error models (the kernel's propagated bound and the feature
map's), so a failure is a real discrepancy, never rounding.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kernelcheck._src.core.calls import call_user
from kernelcheck._src.core.deadline import honours_timeout
from kernelcheck._src.core.results import Result
from kernelcheck._src.core.rounding import Tolerance, default_feature_ops, feature_product_bound
from kernelcheck._src.core.validate import (
    as_array,
    as_int,
    as_points,
    check_callable,
    check_computed,
    describe,
)
from kernelcheck._src.kernels.base import Kernel
from kernelcheck._src.kernels.featuremap import ExactFeatureMap, FeatureMap
from kernelcheck.errors import InvalidArgument

__all__ = ["feature_map", "FeatureMapReport"]


@dataclass(frozen=True, repr=False)
class FeatureMapReport(Result):
    """Outcome of :func:`feature_map`.

    Attributes
    ----------
    passed : bool
        Every entry of ``phi(X) phi(Y)^T`` is within the tolerance of ``k(X, Y)``.
    kernel, feature_map : str
        What was compared.
    n, m, d, D : int
        Number of points in X and Y, input and feature dimension.
    max_abs_error : float
        ``max |phi(X) phi(Y)^T - k(X, Y)|``.
    worst_index : tuple
        (i, j) of the worst entry relative to its tolerance.
    worst_ratio : float
        ``|error| / tolerance`` at that entry (``<= 1`` means within).
    kernel_value, feature_value : float
        ``k(x_i, y_j)`` and ``phi(x_i) . phi(y_j)`` at that entry.
    tolerance : Tolerance
        The largest entry of the entrywise tolerance and its error model.
    """

    passed: bool
    kernel: str
    feature_map: str
    n: int
    m: int
    d: int
    D: int
    max_abs_error: float
    worst_index: tuple
    worst_ratio: float
    kernel_value: float
    feature_value: float
    tolerance: Tolerance

    def _text(self) -> str:
        verdict = "reproduces" if self.passed else "does NOT reproduce"
        i, j = self.worst_index
        return (
            f"{self.feature_map} {verdict} {self.kernel} on {self.n}x{self.m} pairs "
            f"(D={self.D}): max |error| {self.max_abs_error:.3g}; worst at ({i}, {j}) "
            f"{self.feature_value:.6g} vs {self.kernel_value:.6g}, "
            f"{self.worst_ratio:.3g} x its tolerance"
        )

    def first_failure(self) -> str:
        """The worst entry: ``phi(x_i) . phi(y_j)`` against ``k(x_i, y_j)`` and its tolerance.

        Returns
        -------
        str
            Empty when the report passes.
        """
        if self.passed:
            return ""
        i, j = self.worst_index
        return (
            f"phi(X)[{i}] . phi(Y)[{j}] = {self.feature_value:.6g} but k(X[{i}], Y[{j}]) = "
            f"{self.kernel_value:.6g}: {self.worst_ratio:.3g} x its tolerance"
        )

    def details(self) -> str:
        """The tolerance and the error model it came from."""
        return f"tolerance: {self.tolerance}"


def _apply(phi, X: np.ndarray, name: str) -> np.ndarray:
    out = as_array(call_user(phi, f"`phi` on `{name}`", X), f"phi({name})")
    if out.ndim != 2 or out.shape[0] != X.shape[0]:
        raise InvalidArgument(
            f"`phi({name})` must have shape ({X.shape[0]}, D), got {describe(out)}"
        )
    return out


@honours_timeout
def feature_map(
    phi: FeatureMap | object,
    X,
    Y=None,
    *,
    kernel: Kernel | None = None,
    feature_ops: int | None = None,
    timeout: float | None = None,
) -> FeatureMapReport:
    """Check that ``phi(X) @ phi(Y).T`` reproduces ``kernel(X, Y)`` (claim C4).

    Parameters
    ----------
    phi : FeatureMap or callable
        An exact map (``k.features()``), or any callable taking (n, d) and
        returning (n, D) (a user's map; tensors are read via ``np.asarray``).
    X : array_like, shape (n, d)
        Points.
    Y : array_like, shape (m, d), default None
        Points; None means ``Y = X``.
    kernel : Kernel or None, default None
        The kernel to reproduce; defaults to ``phi.kernel``.
    feature_ops : int or None, default None
        Rounded operations behind one feature entry, for the error model of a
        user map (default: the map's own model for kernelcheck maps, else
        ``2 d + 8``, :func:`~kernelcheck._src.core.rounding.default_feature_ops`).
    timeout : float or None, default None
        Seconds from the start of the check within which every call of
        ``phi`` must return: a call still running then is abandoned (it runs
        on in a background thread; Python cannot stop it) and
        :class:`InvalidArgument` says so.  None (default) waits.

    Returns
    -------
    FeatureMapReport

    Notes
    -----
    Error model: entrywise ``tol = E_k + gamma_(D + 2 ops)(1 + gamma_D)
    |phi(X)| |phi(Y)|^T`` where ``E_k`` is the kernel's propagated bound
    (:meth:`Kernel.error_bound`) and the second term covers the feature
    entries' relative errors and the length-D inner product, in the unit
    roundoff of the feature dtype.  Random feature maps only estimate their
    kernel: use :func:`kernelcheck.verify.unbiased` for them.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck import Polynomial, verify
    >>> X = np.random.default_rng(0).normal(size=(6, 3))
    >>> verify.feature_map(Polynomial(3, c=1.0).features(), X).passed
    True
    """
    check_callable(phi, "phi")
    if isinstance(phi, FeatureMap) and not phi.exact:
        raise InvalidArgument(
            f"`phi` {phi!r} is a random feature map: it estimates its kernel only in "
            "expectation; check it with kernelcheck.verify.unbiased"
        )
    if kernel is None:
        kernel = getattr(phi, "kernel", None)
        if not isinstance(kernel, Kernel):
            raise InvalidArgument("`kernel` must be given when `phi` does not carry one")
    elif not isinstance(kernel, Kernel):
        raise InvalidArgument(f"`kernel` must be a kernelcheck Kernel, got {describe(kernel)}")
    Xa = as_points(X, "X")
    Ya = Xa if Y is None else as_points(Y, "Y", dim=Xa.shape[1])
    if feature_ops is None:
        ops = phi.ops if isinstance(phi, ExactFeatureMap) else default_feature_ops(Xa.shape[1])
    else:
        ops = as_int(feature_ops, "feature_ops", minimum=0)

    PX = _apply(phi, Xa, "X")
    PY = PX if Y is None else _apply(phi, Ya, "Y")
    if PX.shape[1] != PY.shape[1]:
        raise InvalidArgument(f"`phi` returned {PX.shape[1]} features on X but {PY.shape[1]} on Y")
    D = PX.shape[1]
    G = kernel(Xa, Ya)
    Ek = kernel.error_bound(Xa, Ya)
    with np.errstate(over="ignore", invalid="ignore"):
        F = check_computed(PX @ PY.T, "phi(X) @ phi(Y).T")
        tol = check_computed(Ek + feature_product_bound(PX, PY, ops), "the tolerance")
    dtype = F.dtype
    err = np.abs(F - G)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(tol > 0, err / np.where(tol > 0, tol, 1.0), np.where(err > 0, np.inf, 0.0))
    worst = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
    tolerance = Tolerance(
        float(tol.max()),
        f"entrywise E_k + gamma_(D+2*ops) |phi(X)||phi(Y)|^T with D={D}, ops={ops}, "
        f"u={np.finfo(dtype).eps / 2:.3g}",
    )
    return FeatureMapReport(
        passed=bool((err <= tol).all()),
        kernel=repr(kernel),
        feature_map=repr(phi)
        if isinstance(phi, FeatureMap)
        else getattr(phi, "__name__", repr(phi)),
        n=Xa.shape[0],
        m=Ya.shape[0],
        d=Xa.shape[1],
        D=D,
        max_abs_error=float(err.max()),
        worst_index=(int(worst[0]), int(worst[1])),
        worst_ratio=float(ratio[worst]),
        kernel_value=float(G[worst]),
        feature_value=float(F[worst]),
        tolerance=tolerance,
    )
