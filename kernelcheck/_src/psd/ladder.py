"""Positive semi-definiteness verdicts you can trust (claim C5, Theorem 1).

:func:`check_psd` decides whether a symmetric matrix is positive (semi-)
definite and returns a :class:`PSDResult` saying how sure it is and with what
evidence.  The entries of ``K`` are taken as exact binary numbers.

The ladder (``method="auto"``), cheapest rung first; each rung either decides
or hands over:

1. **input**: finite, real, square, exactly symmetric (else an error that
   says by how much; ``symmetrize=True`` uses ``(K + K^T) / 2`` and says so);
2. **cheap witnesses**: a diagonal entry ``K_ii < -tol``; at ``tol = 0`` also a
   zero diagonal entry with a non-zero entry in its row;
3. **certified Cholesky** (the fast path): a floating-point Cholesky
   factorisation of the diagonally scaled, shifted matrix ``D K D - c I``
   (``D`` powers of two, so the scaling is exact); by Rump's theorem (S. M.
   Rump, "Verification of positive definiteness", BIT 46, 2006, the method
   of INTLAB's ``isspd``) its success *proves* ``K`` positive definite,
   rounding errors included.  Cost: one Cholesky plus O(n^2);
4. on failure, a **witness from the failed factorisation** and from the
   **2 x 2 principal minors**, each checked in exact arithmetic (a failed
   pivot is not always a witness);
5. **symmetric eigendecomposition** (LAPACK ``syevr`` for the smallest
   eigenpair): its eigenvector is a candidate witness, checked exactly; with
   ``tol > 0`` a certified Cholesky of ``K + tol I`` proves ``lambda_min > -tol``;
6. **mpmath** at increasing precision (n <=
   :data:`~kernelcheck._src.psd.highprec.MPMATH_MAX_N`): the same
   certified Cholesky in ``p``-bit arithmetic (``u = 2**-p``, no underflow),
   and witnesses from its failed pivots, checked exactly;
7. **exact arithmetic** (n <= ``max_exact_n``, default
   :data:`~kernelcheck._src.psd.exact.EXACT_MAX_N`): fraction-free
   elimination on the integer-scaled matrix decides PD / PSD / not PSD
   exactly and produces an exact witness.

Every ``NOT_PSD`` verdict carries a witness ``v`` with
``v^T K v < -tol v^T v`` verified in exact rational arithmetic.

This module holds the input checks and the order of the rungs; the verdict
and the result are in :mod:`~kernelcheck._src.psd.result`, and the rungs'
mathematics lives beside it: the tolerances in
:mod:`~kernelcheck._src.psd.tolerance`, the float64 certificate in
:mod:`~kernelcheck._src.psd.cholesky`, the mpmath rung in
:mod:`~kernelcheck._src.psd.highprec`, exact elimination and exact witnesses
in :mod:`~kernelcheck._src.psd.exact`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import scipy.linalg

from kernelcheck._src.core.rounding import Tolerance
from kernelcheck._src.core.validate import as_bool, as_int, as_square_matrix, check_choice
from kernelcheck._src.psd.cholesky import (
    certified_cholesky,
    cholesky_estimate,
    witness_from_failed_cholesky,
)
from kernelcheck._src.psd.exact import (
    EXACT_MAX_N,
    Witness,
    as_witness,
    exact_decision,
    min_exponent,
    to_int_matrix,
)
from kernelcheck._src.psd.highprec import MPMATH_MAX_N, MPMATH_PRECISIONS, mp_certified_cholesky
from kernelcheck._src.psd.result import PSDResult, Verdict
from kernelcheck._src.psd.tolerance import eigh_error, resolve_tolerance
from kernelcheck.errors import InvalidArgument

__all__ = [
    "PSDInput",
    "check_psd",
    "check_psd_iv",
    "assert_psd",
    "METHODS",
]

#: The rungs ``method=`` can force; ``"auto"`` runs the ladder.
METHODS = ("auto", "cholesky", "eigh", "mpmath", "exact")


# ---------------------------------------------------------------------------
# Input validation
# ---------------------------------------------------------------------------


class PSDInput(NamedTuple):
    """The checked arguments of :func:`check_psd` (what :func:`check_psd_iv` returns)."""

    K: np.ndarray  # float64, exactly symmetric (the symmetrized matrix when asked)
    tolerance: Tolerance
    method: str
    max_exact_n: int
    symmetrized: bool  # (K + K^T) / 2 was used
    asymmetry: float  # max |K - K^T| of the input (0 when exactly symmetric)


def check_psd_iv(
    K, tol, method: str = "auto", symmetrize: bool = False, max_exact_n: int = EXACT_MAX_N
) -> PSDInput:
    """Check the arguments of :func:`check_psd` (also used by ``mercer_features``).

    ``K`` must be a finite real square matrix (float32 is widened exactly) and
    exactly symmetric, unless ``symmetrize=True``: then ``(K + K^T) / 2`` is
    used, each half exact and one rounding per entry.  ``tol`` becomes a
    :class:`Tolerance` by :func:`~kernelcheck._src.psd.tolerance.resolve_tolerance`
    (the default in the unit roundoff of the dtype ``K`` was given in).
    """
    A = as_square_matrix(K, "K")
    in_dtype = A.dtype
    A = np.asarray(A, dtype=np.float64)  # float32 -> float64 is exact
    method = check_choice(method, "method", METHODS)
    symmetrize = as_bool(symmetrize, "symmetrize")
    max_exact_n = as_int(max_exact_n, "max_exact_n", minimum=0)
    asym = 0.0
    symmetrized = False
    if not _is_symmetric(A):
        D = np.abs(A - A.T)
        i, j = np.unravel_index(int(np.argmax(D)), D.shape)
        asym = float(D[i, j])
        scale = float(np.max(np.abs(A)))
        if not symmetrize:
            raise InvalidArgument(
                f"`K` must be symmetric, but max |K - K^T| = {asym:.3g} at index ({i}, {j}) "
                f"({asym / scale:.3g} relative to max |K| = {scale:.3g}); pass symmetrize=True "
                "to test (K + K^T) / 2 instead (the result records it)"
            )
        A = 0.5 * A + 0.5 * A.T  # each half is exact; one rounding per entry, symmetric
        symmetrized = True
    tolerance = resolve_tolerance(tol, A, dtype=in_dtype)
    return PSDInput(A, tolerance, method, max_exact_n, symmetrized, asym)


def _is_symmetric(A: np.ndarray, block: int = 256) -> bool:
    """Exact symmetry, compared in square blocks (cache-friendly transposes)."""
    n = A.shape[0]
    for i in range(0, n, block):
        if not np.array_equal(A[i : i + block, i:], A[i:, i : i + block].T):
            return False
    return True


# ---------------------------------------------------------------------------
# The ladder
# ---------------------------------------------------------------------------


class _Ladder:
    def __init__(self, K, tolerance, max_exact_n, symmetrized, asym):
        self.K = K
        self.n = K.shape[0]
        self.tolerance = tolerance
        self.t = float(tolerance.value)
        self.max_exact_n = max_exact_n
        self.symmetrized = symmetrized
        self.asym = asym
        self.rungs: list[str] = []
        self.lam = math.nan
        self.lam_err = math.inf
        self._e = None
        self._e_done = False

    # -- helpers ------------------------------------------------------------
    @property
    def e(self):
        if not self._e_done:
            self._e = min_exponent(self.K)
            self._e_done = True
        return self._e

    def result(self, verdict, method, certified, reason="", witness: Witness | None = None):
        wv = wx = None
        vec = None
        if witness is not None:
            vec = witness.vector
            wv = float(witness.value)
            wx = f"{witness.value.numerator}/{witness.value.denominator}"
        is_psd = verdict in (Verdict.POSITIVE_DEFINITE, Verdict.POSITIVE_SEMIDEFINITE)
        return PSDResult(
            verdict=verdict,
            is_psd=is_psd,
            certified=certified,
            method=method,
            n=self.n,
            min_eigenvalue=float(self.lam),
            min_eigenvalue_error=float(self.lam_err),
            tol=self.tolerance,
            witness=vec,
            witness_value=wv,
            witness_value_exact=wx,
            reason=reason,
            rungs=tuple(self.rungs),
            symmetrized=self.symmetrized,
            asymmetry=self.asym,
        )

    def not_psd(self, method, w: Witness, reason):
        if not math.isfinite(self.lam):
            self.lam = float(w.value)
            self.lam_err = math.inf
        return self.result(Verdict.NOT_PSD, method, True, reason, w)

    def check(self, v):
        if v is None:
            return None
        return as_witness(self.K, v, self.t, self.e)

    def _unit(self, idx, vals):
        v = np.zeros(self.n)
        v[list(idx)] = vals
        return v

    # -- rungs --------------------------------------------------------------
    def diagonal(self):
        self.rungs.append("diagonal")
        K, t = self.K, self.t
        dg = np.diagonal(K)
        i = int(np.argmin(dg))
        if dg[i] < -t:
            w = self.check(self._unit([i], [1.0]))
            return self.not_psd("diagonal", w, f"diagonal entry K[{i},{i}] = {dg[i]:.3g} < -tol")
        if t == 0:
            zero = np.flatnonzero(dg == 0)
            for i in zero[:64]:
                row = K[i]
                nzj = np.flatnonzero(row != 0)
                if nzj.size:
                    w = self.minor_witness(int(i), int(nzj[0]))
                    if w is not None:
                        return self.not_psd(
                            "diagonal", w, f"K[{i},{i}] = 0 but K[{i},{nzj[0]}] != 0"
                        )
        return None

    def minor_witness(self, i, j):
        sub = self.K[np.ix_([i, j], [i, j])]
        _, vecs = np.linalg.eigh(sub)
        cands = [vecs[:, 0]]
        a, b, c = sub[0, 0], sub[0, 1], sub[1, 1]
        if a > 0:
            cands.append(np.array([-b, a]))
        elif c > 0:
            cands.append(np.array([c, -b]))
        else:
            cands.append(np.array([-np.sign(b) * (abs(c) / abs(b) + 1.0) if b else 1.0, 1.0]))
        for cv in cands:
            w = self.check(self._unit([i, j], cv))
            if w is not None:
                return w
        return None

    def minors(self):
        """The most violated 2 x 2 principal minor ``(K_ii + t)(K_jj + t) < K_ij^2``."""
        self.rungs.append("minor")
        K, t = self.K, self.t
        dg = np.diagonal(K) + t
        with np.errstate(over="ignore", invalid="ignore"):
            gap = K * K - np.outer(dg, dg)
        np.fill_diagonal(gap, -np.inf)
        flat = int(np.argmax(gap))
        i, j = divmod(flat, self.n)
        if not gap[i, j] > 0:
            return None
        w = self.minor_witness(i, j)
        if w is None:
            return None
        return self.not_psd("minor", w, f"2 x 2 principal minor at ({i}, {j}) is negative")

    def cholesky(self, *, witness=True):
        self.rungs.append("cholesky")
        ch = certified_cholesky(self.K, 0.0)
        if ch.ok:
            est = cholesky_estimate(self.K, ch)
            if math.isfinite(est):
                self.lam = est
                self.lam_err = max(est, 0.0)  # lambda_min in (0, est]
            return self.result(
                Verdict.POSITIVE_DEFINITE,
                "cholesky",
                True,
                f"Cholesky of D K D - c I succeeded with Rump's shift c = {ch.c:.3g}",
            )
        if witness:
            v = witness_from_failed_cholesky(self.K, ch)
            w = self.check(v)
            if w is not None:
                return self.not_psd(
                    "cholesky", w, f"Cholesky failed at pivot {ch.info}; its vector is a witness"
                )
        return None

    def cholesky_tol(self):
        """Certify ``lambda_min(K) > -tol`` with a Cholesky of ``K + tol I``."""
        if self.t <= 0:
            return None
        self.rungs.append("cholesky+tol")
        ch = certified_cholesky(self.K, self.t)
        if ch.ok:
            return self.result(
                Verdict.POSITIVE_SEMIDEFINITE,
                "cholesky",
                True,
                f"Cholesky of K + tol I succeeded (Rump's shift c = {ch.c:.3g}): lambda_min > -tol",
            )
        return None

    def eigh(self):
        self.rungs.append("eigh")
        K = self.K
        w, V = scipy.linalg.eigh(K, subset_by_index=[0, 0], check_finite=False)
        self.lam = float(w[0])
        self.lam_err = eigh_error(K)
        cand = self.check(V[:, 0])
        if cand is not None:
            return self.not_psd("eigh", cand, "eigenvector of the smallest eigenvalue is a witness")
        return None

    def eigh_estimate(self):
        """Uncertified verdict from the eigenvalue estimate, or None in the grey zone."""
        if not math.isfinite(self.lam):
            return None
        if self.lam - self.lam_err >= -self.t and self.t > 0:
            return self.result(
                Verdict.POSITIVE_SEMIDEFINITE,
                "eigh",
                False,
                "lambda_min estimate is above -tol by more than its error bound (not certified)",
            )
        return None

    def mpmath(self):
        if self.n > MPMATH_MAX_N:
            return None
        self.rungs.append("mpmath")
        shifts = [0.0] + ([self.t] if self.t > 0 else [])
        for prec in MPMATH_PRECISIONS:
            for shift in shifts:
                ok, v = mp_certified_cholesky(self.K, shift, prec)
                if ok:
                    verdict = (
                        Verdict.POSITIVE_DEFINITE if shift == 0 else Verdict.POSITIVE_SEMIDEFINITE
                    )
                    what = "K" if shift == 0 else "K + tol I"
                    return self.result(
                        verdict,
                        "mpmath",
                        True,
                        f"{prec}-bit Cholesky of {what} with Rump's shift succeeded",
                    )
                w = self.check(v) if v is not None else None
                if w is not None:
                    return self.not_psd(
                        "mpmath", w, f"{prec}-bit Cholesky failed; its pivot vector is a witness"
                    )
        return None

    def exact(self):
        if self.n > self.max_exact_n:
            return None
        self.rungs.append("exact")
        K, t = self.K, self.t
        e = self.e
        if e is None:  # the zero matrix
            verdict = Verdict.POSITIVE_SEMIDEFINITE
            return self.result(verdict, "exact", True, "K is the zero matrix")
        M, e = to_int_matrix(K, e)
        dec = exact_decision(M)
        if dec.kind == "pd":
            return self.result(
                Verdict.POSITIVE_DEFINITE, "exact", True, "exact elimination: all pivots > 0"
            )
        if dec.kind == "psd":
            return self.result(
                Verdict.POSITIVE_SEMIDEFINITE,
                "exact",
                True,
                f"exact elimination: PSD and singular ({len(dec.zeros)} zero pivot(s))",
            )
        w = self.check(dec.vector)
        if w is not None:
            return self.not_psd("exact", w, "exact elimination found a negative direction")
        if t > 0:
            # K is not PSD; is K + tol I?  Decide it exactly on the shifted matrix.
            et = min(e, min_exponent(np.array([t])) or e)
            Mt, _ = to_int_matrix(K, et)
            tint, _ = to_int_matrix(np.array([t]), et)
            for i in range(self.n):
                Mt[i, i] += tint[0]
            dec2 = exact_decision(Mt)
            if dec2.kind in ("pd", "psd"):
                return self.result(
                    Verdict.POSITIVE_SEMIDEFINITE,
                    "exact",
                    True,
                    "exact elimination: K is not PSD but K + tol I is (lambda_min >= -tol)",
                )
            w = self.check(dec2.vector)
            if w is not None:
                return self.not_psd("exact", w, "exact elimination on K + tol I found a witness")
        return None  # pragma: no cover - exact witnesses always verify

    def inconclusive(self, reason):
        return self.result(
            Verdict.INCONCLUSIVE, self.rungs[-1] if self.rungs else "none", False, reason
        )


def check_psd(
    K,
    *,
    tol=None,
    method: str = "auto",
    symmetrize: bool = False,
    max_exact_n: int = EXACT_MAX_N,
) -> PSDResult:
    r"""Decide whether a symmetric matrix is positive semi-definite (claim C5).

    The entries of ``K`` are taken as exact binary numbers.  ``is_psd`` means
    "PSD within ``tol``": ``lambda_min(K) >= -tol``.

    Parameters
    ----------
    K : array_like, shape (n, n)
        Finite, real, exactly symmetric (float32 is widened exactly).
    tol : float, Tolerance or None
        ``None`` (default):
        :func:`~kernelcheck._src.psd.tolerance.default_tolerance`,
        ``2 gamma_{n+2} max(||K||_F, sum_i |K_ii|)``, what rounding cannot
        resolve.  ``0``: the exact question about ``K`` as given -- every
        answer is certified or ``INCONCLUSIVE`` with the reason (exact
        arithmetic is used up to ``n = max_exact_n``).  A positive number: an
        absolute tolerance on ``lambda_min``.
    method : {"auto", "cholesky", "eigh", "mpmath", "exact"}
        ``"auto"`` runs the ladder (module docstring); the others force one
        rung (after the input checks), returning ``INCONCLUSIVE`` when that
        rung cannot decide.
    symmetrize : bool
        A non-symmetric ``K`` is an error that states ``max |K - K^T|``;
        with ``symmetrize=True`` the test runs on ``(K + K^T) / 2`` instead and
        the result records ``symmetrized=True`` and the asymmetry.
    max_exact_n : int
        Largest n for exact elimination (cost grows like n**3 operations on
        integers of ~n * 60 bits: about 0.3 s at n = 60, 13 s at n = 120).

    Returns
    -------
    PSDResult
        ``verdict``, ``is_psd``, ``certified``, ``method``, the
        ``min_eigenvalue`` estimate and its error bound, ``tol`` with its
        source, and for ``NOT_PSD`` an exactly verified ``witness``.

    Notes
    -----
    Error models behind the numbers:

    * Cholesky rung: Rump's criterion (see
      :func:`~kernelcheck._src.psd.cholesky.certified_cholesky`); its
      ``min_eigenvalue`` is the Rayleigh quotient after one inverse
      iteration, with ``lambda_min`` in ``(0, estimate]``.
    * eigh rung: LAPACK's symmetric eigensolvers are backward stable; the
      computed eigenvalue is within ``p(n) u ||K||_2`` of the exact one; we
      report ``gamma_{p(n)} ||K||_F`` as that bound, ``p(n) = 64 (n + 2)``
      (:func:`~kernelcheck._src.psd.tolerance.eigh_error`).
    * Witness values are exact rationals (see ``witness_value_exact``).

    A Gram matrix of a true kernel that is singular (a linear kernel with more
    points than dimensions) is, once its entries are rounded, usually exactly
    indefinite: ``NOT_PSD`` at ``tol=0``, ``is_psd`` at the default tolerance.
    :func:`kernelcheck.verify.kernel` speaks about the kernel itself.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.psd import check_psd
    >>> r = check_psd(np.array([[2.0, 1.0], [1.0, 2.0]]))
    >>> r.verdict.name, r.certified
    ('POSITIVE_DEFINITE', True)
    >>> bad = check_psd(np.array([[1.0, 2.0], [2.0, 1.0]]))
    >>> bad.verdict.name, bad.witness_value < 0
    ('NOT_PSD', True)
    >>> X = np.arange(6.0).reshape(3, 2)
    >>> check_psd(X @ X.T, tol=0).verdict.name  # rank 2 of 3, exactly singular
    'POSITIVE_SEMIDEFINITE'
    """
    args = check_psd_iv(K, tol, method, symmetrize, max_exact_n)
    lad = _Ladder(args.K, args.tolerance, args.max_exact_n, args.symmetrized, args.asymmetry)
    if args.method == "auto":
        return _auto(lad)
    return _FORCED[args.method](lad)


# ---------------------------------------------------------------------------
# The rung order
# ---------------------------------------------------------------------------


def _auto(lad: _Ladder) -> PSDResult:
    """``method="auto"``: the ladder of the module docstring, cheapest rung first."""
    r = _first(lad.diagonal, lad.cholesky, lad.minors, lad.eigh, lad.cholesky_tol)
    if r is None:
        if lad.t > 0:
            r = _first(lad.mpmath, lad.exact, lad.eigh_estimate)
        else:
            r = _first(lad.exact, lad.mpmath)
    if r is not None:
        return r
    n, max_exact_n = lad.n, lad.max_exact_n
    limits = []
    if n > max_exact_n:
        limits.append(f"n = {n} > max_exact_n = {max_exact_n}")
    if n > MPMATH_MAX_N:
        limits.append(f"n > {MPMATH_MAX_N} for mpmath")
    why = "; ".join(limits) if limits else "no rung separated lambda_min from -tol"
    return lad.inconclusive(
        f"lambda_min ~ {lad.lam:.3g} +- {lad.lam_err:.3g} is within rounding of -tol ({why})"
    )


def _forced_cholesky(lad: _Ladder) -> PSDResult:
    """``method="cholesky"``: the certificates of ``K`` and of ``K + tol I`` only."""
    r = _first(lad.cholesky, lad.cholesky_tol)
    return r if r is not None else lad.inconclusive("the certified Cholesky could not decide")


def _forced_eigh(lad: _Ladder) -> PSDResult:
    """``method="eigh"``: the eigenvector witness, else the (uncertified) estimate."""
    r = lad.eigh()
    if r is None and lad.lam - lad.lam_err >= -lad.t:
        r = lad.result(
            Verdict.POSITIVE_SEMIDEFINITE,
            "eigh",
            False,
            "eigenvalue estimate only: lambda_min >= -tol within its error bound "
            "(positive definiteness is certified by the Cholesky rung only)",
        )
    return (
        r
        if r is not None
        else lad.inconclusive(
            f"lambda_min ~ {lad.lam:.3g} +- {lad.lam_err:.3g} does not separate from -tol"
        )
    )


def _forced_mpmath(lad: _Ladder) -> PSDResult:
    """``method="mpmath"``: the high-precision certificates and witnesses only."""
    if lad.n > MPMATH_MAX_N:
        return lad.inconclusive(f"n = {lad.n} exceeds the mpmath limit {MPMATH_MAX_N}")
    r = lad.mpmath()
    return (
        r
        if r is not None
        else lad.inconclusive(f"no certificate or witness at {MPMATH_PRECISIONS[-1]} bits")
    )


def _forced_exact(lad: _Ladder) -> PSDResult:
    """``method="exact"``: exact elimination only (up to ``max_exact_n``)."""
    r = lad.exact()
    return (
        r
        if r is not None
        else lad.inconclusive(
            f"n = {lad.n} exceeds max_exact_n = {lad.max_exact_n} (exact elimination costs "
            "O(n^3) operations on integers of ~60 n bits)"
        )
    )


#: The rung a forced ``method=`` runs.
_FORCED = {
    "cholesky": _forced_cholesky,
    "eigh": _forced_eigh,
    "mpmath": _forced_mpmath,
    "exact": _forced_exact,
}


def _first(*rungs):
    """Run ``rungs`` in order; the first result that is not None (a verdict object is
    falsy when not PSD, so ``or`` must not be used)."""
    for rung in rungs:
        r = rung()
        if r is not None:
            return r
    return None


def assert_psd(
    K, *, tol=None, method: str = "auto", allow_inconclusive: bool = False, **kwargs
) -> PSDResult:
    """Assert that ``K`` is PSD within ``tol`` (pytest twin of :func:`check_psd`, claim C5).

    Raises
    ------
    AssertionError
        With the verdict, the rung, the witness value (``v^T K v / v^T v``, an
        exact rational), the eigenvalue estimate and the tolerance with its
        source.  ``INCONCLUSIVE`` fails unless ``allow_inconclusive=True``.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.testing import assert_psd
    >>> assert_psd(np.eye(3)).verdict.name
    'POSITIVE_DEFINITE'
    """
    r = check_psd(K, tol=tol, method=method, **kwargs)
    if r.is_psd or (allow_inconclusive and r.verdict is Verdict.INCONCLUSIVE):
        return r
    if r.verdict is Verdict.NOT_PSD:
        v = r.witness
        assert r.witness_value is not None  # every NOT_PSD carries a verified witness
        support = np.flatnonzero(np.asarray([x != 0 for x in v]))
        where = f"on indices {support[:8].tolist()}{'...' if support.size > 8 else ''}"
        msg = (
            f"K ({r.n} x {r.n}) is not PSD within tol = {r.tol.value:.3g} ({r.tol.source}): "
            f"witness v {where} has v^T K v / v^T v = {r.witness_value:.6g} "
            f"(exact {r.witness_value_exact}), "
            f"below -tol by {-(r.witness_value + r.tol.value):.3g}; "
            f"decided by the {r.method} rung"
        )
        if math.isfinite(r.min_eigenvalue):
            msg += f"; lambda_min ~ {r.min_eigenvalue:.6g}"
    else:
        msg = f"PSD check of K ({r.n} x {r.n}) is inconclusive: {r.reason} (tol = {r.tol})"
    raise AssertionError(msg)
