"""Theorem 2 made finite (claim C6): features of a PSD Gram matrix, and Nystrom.

For a symmetric PSD matrix ``K = U Lambda U^T`` (``Lambda >= 0``), the rows of
``Phi = U Lambda^(1/2)`` are feature vectors with ``Phi Phi^T = K``: each
point ``x_i`` gets ``phi(x_i) = Phi[i]``.  :func:`mercer_features` computes
them with a stated rank threshold; :class:`Nystrom` carries the map to new
points through the kernel:
``phi(x) = Lambda_r^(-1/2) U_r^T [k(x_1, x), ..., k(x_n, x)]``, which
reproduces ``Phi[i]`` at the landmark ``x_i`` and gives the Nystrom
approximation ``k(x, X) K^+ k(X, y)`` between new points.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg

from kernelcheck._src.core.calls import call_user
from kernelcheck._src.core.results import Result
from kernelcheck._src.core.rounding import Tolerance
from kernelcheck._src.core.validate import as_array, as_points, describe
from kernelcheck._src.kernels.featuremap import FeatureMap
from kernelcheck._src.psd.inputs import check_psd_iv
from kernelcheck._src.psd.tolerance import eigh_error, frobenius
from kernelcheck.errors import InvalidArgument, NumericalFailure

__all__ = ["MercerFeatures", "mercer_features", "Nystrom"]


@dataclass(frozen=True, repr=False)
class MercerFeatures(Result):
    """Features ``Phi`` (n, r) with ``Phi Phi^T = K`` within an error model (claim C6).

    Attributes
    ----------
    phi : ndarray (n, r)
        ``U_r Lambda_r^(1/2)``, columns in decreasing eigenvalue order.
    rank : int
        ``r``, the number of eigenvalues above ``threshold``.
    eigenvalues : ndarray (n,)
        All computed eigenvalues of ``K``, decreasing.
    threshold : Tolerance
        Eigenvalues at or below it are treated as zero (rounding cannot tell
        them from zero; see :func:`mercer_features`).
    residual : float
        Measured ``max_ij |(Phi Phi^T - K)_ij|``.
    error_bound : float
        Bound on ``||Phi Phi^T - K||_2`` (hence on every entry): the largest
        dropped ``|lambda|`` plus the eigensolver and product rounding,
        ``3 gamma_p ||K||_F`` with ``p = 64 (n + 2)``.
    passed : bool
        ``residual <= error_bound``.
    """

    phi: np.ndarray
    rank: int
    eigenvalues: np.ndarray
    threshold: Tolerance
    residual: float
    error_bound: float
    passed: bool

    def _text(self) -> str:
        n = self.phi.shape[0]
        op = "<=" if self.passed else ">"
        return (
            f"Phi ({n} x {self.rank}) reproduces K with max residual "
            f"{self.residual:.3g} {op} bound {self.error_bound:.3g}"
        )

    def gram(self) -> np.ndarray:
        """``Phi Phi^T``, the reconstructed matrix."""
        return self.phi @ self.phi.T

    def extend(self, kernel, landmarks) -> Nystrom:
        """The Nystrom map of ``kernel`` on ``landmarks`` (whose Gram this ``K`` must be).

        Reuses this eigendecomposition; raises :class:`InvalidArgument` when
        ``kernel(landmarks)`` is not the matrix these features came from.

        Parameters
        ----------
        kernel : Kernel or callable
            The kernel whose Gram on ``landmarks`` is this ``K``.
        landmarks : array_like, shape (n, d)
            The points ``K`` was computed on.
        """
        X = as_points(landmarks, "landmarks")
        if X.shape[0] != self.phi.shape[0]:
            raise InvalidArgument(
                f"`landmarks` must have n = {self.phi.shape[0]} rows (one per row of K), "
                f"got {describe(X)}"
            )
        K = _kernel_block(kernel, X, None, "kernel(landmarks)")
        if K.shape != (X.shape[0], X.shape[0]):
            raise InvalidArgument(
                f"`kernel(landmarks)` must be a ({X.shape[0]}, {X.shape[0]}) Gram matrix, "
                f"got {describe(K)}"
            )
        gap = float(np.max(np.abs(self.gram() - K)))
        if gap > self.error_bound + self.residual:
            raise InvalidArgument(
                f"`kernel(landmarks)` differs from the decomposed K by {gap:.3g} "
                f"(> bound {self.error_bound:.3g}); pass the landmarks K was built on"
            )
        return Nystrom._from_features(kernel, X, self)


def _kernel_block(kernel, A, B, what: str) -> np.ndarray:
    """``kernel(A)`` or ``kernel(A, B)`` as a finite real 2-d float64 array.

    A user kernel that raises, or returns something other than a finite real
    matrix, gives :class:`InvalidArgument` naming the call (kernelcheck's
    own errors pass through; the kernel gets copies of the points).
    """
    label = f"`kernel`: the call {what}"
    out = call_user(kernel, label, A) if B is None else call_user(kernel, label, A, B)
    return np.asarray(as_array(out, what, ndim=2), dtype=np.float64)


def _mercer_iv(K, tol, symmetrize):
    args = check_psd_iv(K, tol, symmetrize=symmetrize)
    return args.K, args.tolerance


def mercer_features(K, *, tol=None, symmetrize: bool = False) -> MercerFeatures:
    r"""Feature vectors of a PSD matrix: ``Phi Phi^T = K`` (Theorem 2, claim C6).

    Parameters
    ----------
    K : array_like (n, n)
        Symmetric and PSD within ``tol``.
    tol : float, Tolerance or None, default None
        Rank threshold and PSD tolerance.  Default: the
        :func:`~kernelcheck.psd.check_psd` default
        ``2 gamma_{n+2} max(||K||_F, sum|K_ii|)`` -- eigenvalues of size
        below it are indistinguishable from zero after rounding, so they are
        dropped (their directions carry no signal).
    symmetrize : bool, default False
        As in :func:`~kernelcheck.psd.check_psd`.

    Returns
    -------
    MercerFeatures
        ``phi`` (n, r), the rank, eigenvalues, the threshold, the measured
        residual and its bound.

    Raises
    ------
    InvalidArgument
        When ``K`` has an eigenvalue below ``-tol`` beyond the eigensolver's
        error (it is not PSD; :func:`~kernelcheck.psd.check_psd` gives a witness).

    Notes
    -----
    Error model: LAPACK's symmetric eigensolver returns ``U, Lambda`` exact
    for ``K + E`` with ``||E||_2 <= p(n) u ||K||_2`` and ``U`` orthonormal to
    ``p(n) u`` ("a modestly growing function of n", LAPACK Users' Guide
    section 4.7; taken here as ``p(n) = 64 (n + 2)``, the
    ``EIGH_P`` constant shared with ``check_psd``);
    dropping eigenvalues ``<= tol`` adds at most ``tol``; forming
    ``Phi Phi^T`` adds ``gamma_r ||Phi||^2 <= gamma_r tr K``.  Hence
    ``||Phi Phi^T - K||_2 <= max_dropped |lambda| + 3 gamma_{p(n)} ||K||_F``.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.psd import mercer_features
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> F = mercer_features(X @ X.T)
    >>> F.rank, F.passed
    (2, True)
    """
    A, tolerance = _mercer_iv(K, tol, symmetrize)
    n = A.shape[0]
    # divide and conquer (syevd): markedly more orthogonal U than syevr on
    # matrices with clustered large eigenvalues, which is what Phi needs
    w, U = scipy.linalg.eigh(A, check_finite=False, driver="evd")
    w = w[::-1]
    U = U[:, ::-1]
    fro = frobenius(A)
    eig_err = eigh_error(A)
    t = float(tolerance.value)
    if w[-1] < -t - eig_err:
        raise InvalidArgument(
            f"`K` is not PSD within tol = {t:.3g}: its smallest eigenvalue is {w[-1]:.6g} "
            f"(eigensolver error <= {eig_err:.3g}); kernelcheck.check_psd(K) gives an exact witness"
        )
    keep = w > t
    r = int(keep.sum())
    phi = U[:, :r] * np.sqrt(w[:r])
    dropped = float(np.max(np.abs(w[r:]))) if r < n else 0.0
    bound = dropped + 3.0 * eig_err
    with np.errstate(over="ignore", invalid="ignore"):
        residual = float(np.max(np.abs(phi @ phi.T - A))) if r else float(np.max(np.abs(A)))
    if not (np.isfinite(w).all() and math.isfinite(bound) and math.isfinite(residual)):
        raise NumericalFailure(
            f"mercer_features: ||K||_F = {fro:.3g} is beyond what float64 can factor and check "
            "(eigenvalues, Phi Phi^T or the error bound overflow); scale K by a power of two"
        )
    threshold = Tolerance(t, f"rank threshold = PSD tolerance: {tolerance.source}")
    phi.setflags(write=False)
    return MercerFeatures(
        phi=phi,
        rank=r,
        eigenvalues=w,
        threshold=threshold,
        residual=residual,
        error_bound=bound,
        passed=bool(residual <= bound),
    )


class Nystrom(FeatureMap):
    """Nystrom extension of the Mercer features to new points (claim C6).

    ``phi(y) = k(y, X) U_r Lambda_r^(-1/2)`` for landmarks ``X`` (n, d) and
    ``k(X) = U Lambda U^T``; at a landmark it equals the row of
    :func:`mercer_features`, and ``phi(y) . phi(z) = k(y, X) K^+_r k(X, z)``
    (the rank-r Nystrom approximation; exact when ``k(., y)`` lies in the
    span of the ``k(., x_i)``, e.g. a linear kernel with ``rank = d``).

    Parameters
    ----------
    kernel : Kernel
        Any kernelcheck kernel (or a callable ``kernel(X, Y) -> (n, m)``).
    landmarks : array_like (n, d)
    tol : float, Tolerance or None, default None
        Rank threshold, as in :func:`mercer_features`.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.kernels import Linear
    >>> from kernelcheck.psd import Nystrom
    >>> X = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    >>> phi = Nystrom(Linear(), X)
    >>> Y = np.array([[3.0, -1.0]])
    >>> bool(np.allclose(phi(Y) @ phi(X).T, Y @ X.T))
    True
    """

    exact = False

    def __init__(self, kernel, landmarks, *, tol=None):
        if not callable(kernel):
            raise InvalidArgument(f"`kernel` must be a kernel (callable), got {describe(kernel)}")
        X = as_points(landmarks, "landmarks")
        K = _kernel_block(kernel, X, None, "kernel(landmarks)")
        if K.shape != (X.shape[0], X.shape[0]):
            raise InvalidArgument(
                f"`kernel(landmarks)` must be a ({X.shape[0]}, {X.shape[0]}) Gram matrix, "
                f"got {describe(K)}"
            )
        feats = mercer_features(K, tol=tol)
        self._init(kernel, X, feats)

    @classmethod
    def _from_features(cls, kernel, X, feats: MercerFeatures) -> Nystrom:
        obj = cls.__new__(cls)
        obj._init(kernel, X, feats)
        return obj

    def _init(self, kernel, X, feats):
        r = feats.rank
        lam = feats.eigenvalues[:r]
        # U_r = Phi_r Lambda_r^(-1/2), so the projection is Phi_r / Lambda_r
        proj = feats.phi / lam if r else np.zeros((X.shape[0], 0))
        X = X.copy()
        X.setflags(write=False)
        proj.setflags(write=False)
        self._kernel = kernel
        self.landmarks = X
        self.features = feats
        self.projection = proj

    @property
    def kernel(self) -> Any:
        """The kernel whose Nystrom approximation this map gives."""
        return self._kernel

    @property
    def rank(self) -> int:
        """Number of features r."""
        return self.features.rank

    def output_dim(self, d: int) -> int:
        """r, whatever ``d`` (the landmarks fix the feature dimension).

        Parameters
        ----------
        d : int
            Input dimension (unused: the landmarks fix r).
        """
        return self.rank

    def __call__(self, Y) -> np.ndarray:
        """``phi(Y)`` of shape (m, r)."""
        Ya = as_points(Y, "Y", dim=self.landmarks.shape[1])
        C = _kernel_block(self._kernel, Ya, self.landmarks, "kernel(Y, landmarks)")
        if C.shape != (Ya.shape[0], self.landmarks.shape[0]):
            raise InvalidArgument(
                f"`kernel(Y, landmarks)` must have shape ({Ya.shape[0]}, "
                f"{self.landmarks.shape[0]}), got {describe(C)}"
            )
        return C @ self.projection

    def approximate_kernel(self, Y, Z=None) -> np.ndarray:
        """``phi(Y) phi(Z)^T``, the Nystrom approximation of ``kernel(Y, Z)``.

        Parameters
        ----------
        Y : array_like, shape (p, d)
            Points.
        Z : array_like, shape (q, d), default None
            Points; None means ``Z = Y``.
        """
        PY = self(Y)
        PZ = PY if Z is None else self(Z)
        return PY @ PZ.T

    def __repr__(self) -> str:
        n, d = self.landmarks.shape
        return f"Nystrom({self._kernel!r}, {n} landmarks in R^{d}, rank {self.rank})"
