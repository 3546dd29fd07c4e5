"""What :func:`~kernelcheck.psd.check_psd` answers (claim C5): the verdict and its evidence.

:class:`Verdict` is the answer (positive definite, positive semi-definite,
not PSD, inconclusive) and :class:`PSDResult` the answer with its evidence:
the rung that decided, the eigenvalue estimate with its error bound, the
tolerance with its source and, for ``NOT_PSD``, the exactly verified
witness.  The ladder that produces them is :mod:`kernelcheck._src.psd.ladder`.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kernelcheck._src.core.outcome import Outcome
from kernelcheck._src.core.results import Result
from kernelcheck._src.core.rounding import Tolerance

__all__ = ["Verdict", "PSDResult"]


class Verdict(enum.Enum):
    """The answer of :func:`~kernelcheck.psd.check_psd` (claim C5).

    * ``POSITIVE_DEFINITE``: ``lambda_min(K) > 0``; always certified (a proof
      that covers every rounding error).
    * ``POSITIVE_SEMIDEFINITE``: ``lambda_min(K) >= -tol`` (with ``tol = 0``:
      PSD and singular), but not proven definite.
    * ``NOT_PSD``: a witness ``v`` with ``v^T K v < -tol ||v||^2`` in exact
      arithmetic, so ``lambda_min(K) < -tol``.
    * ``INCONCLUSIVE``: no rung could decide; ``PSDResult.reason`` says why.

    Examples
    --------
    >>> from kernelcheck.psd import Verdict
    >>> Verdict.NOT_PSD.value
    'not_psd'
    """

    POSITIVE_DEFINITE = "positive_definite"
    POSITIVE_SEMIDEFINITE = "positive_semidefinite"
    NOT_PSD = "not_psd"
    INCONCLUSIVE = "inconclusive"

    @property
    def outcome(self) -> Outcome:
        """The verdict in the one outcome vocabulary: PSD verified, not PSD refuted."""
        if self in (Verdict.POSITIVE_DEFINITE, Verdict.POSITIVE_SEMIDEFINITE):
            return Outcome.VERIFIED
        return Outcome.REFUTED if self is Verdict.NOT_PSD else Outcome.INCONCLUSIVE


#: How the one line of a :class:`PSDResult` words each verdict after its outcome.
VERDICT_WORDS = {
    Verdict.POSITIVE_DEFINITE: "positive definite",
    Verdict.POSITIVE_SEMIDEFINITE: "positive semi-definite",
    Verdict.NOT_PSD: "not positive semi-definite",
    Verdict.INCONCLUSIVE: "undecided",
}


@dataclass(frozen=True, repr=False)
class PSDResult(Result):
    """The verdict of :func:`~kernelcheck.psd.check_psd` with its evidence (claim C5).

    Attributes
    ----------
    verdict : Verdict
        See :class:`Verdict`.
    is_psd : bool
        ``True`` for ``POSITIVE_DEFINITE`` and ``POSITIVE_SEMIDEFINITE``: "PSD
        within ``tol``".  ``False`` for ``NOT_PSD`` and ``INCONCLUSIVE``.
    certified : bool
        The verdict is proven for the matrix as given (rounding included), not
        estimated.  Only a ``POSITIVE_SEMIDEFINITE`` read off an eigenvalue
        estimate, or ``INCONCLUSIVE``, is uncertified.
    method : str
        The rung that decided: ``"diagonal"``, ``"cholesky"``, ``"minor"``,
        ``"eigh"``, ``"mpmath"``, ``"exact"``.
    n : int
        Size of ``K``.
    min_eigenvalue : float
        Estimate of ``lambda_min(K)`` (``nan`` when no rung computed one).
    min_eigenvalue_error : float
        Bound on ``|min_eigenvalue - lambda_min(K)|`` under the rung's error
        model (see :func:`~kernelcheck.psd.check_psd`); ``inf`` when unknown.
    tol : Tolerance
        The tolerance used and where it came from.
    witness : ndarray or None
        For ``NOT_PSD``: a vector ``v`` with ``v^T K v < -tol v^T v`` exactly.
        float64 when a float vector does it; otherwise an object array of
        Python integers (an exact witness too large or too delicate for
        float64, e.g. for a rounded Hilbert matrix).
    witness_value : float or None
        ``v^T K v / v^T v`` (exact value, rounded to float64).
    witness_value_exact : str or None
        The same Rayleigh quotient as an exact fraction ``"p/q"``.
    reason : str
        One sentence on why this verdict (always set for ``INCONCLUSIVE``).
    rungs : tuple of str
        Every rung tried, in order.
    symmetrized : bool
        Whether ``(K + K^T) / 2`` was used (``symmetrize=True`` on a
        non-symmetric input).
    asymmetry : float
        ``max |K - K^T|`` of the input (0 when exactly symmetric).
    lower_bound, upper_bound : float
        Proven bounds of ``lambda_min`` (``-inf`` / ``inf`` when no rung proved
        one): from a certificate (``0`` for ``POSITIVE_DEFINITE``, ``-tol`` or
        the certified margin for ``POSITIVE_SEMIDEFINITE``), a diagonal entry
        or a witness's exact Rayleigh quotient rounded up.
    """

    verdict: Verdict
    is_psd: bool
    certified: bool
    method: str
    n: int
    min_eigenvalue: float
    min_eigenvalue_error: float
    tol: Tolerance
    witness: Any = None
    witness_value: float | None = None
    witness_value_exact: str | None = None
    reason: str = ""
    rungs: tuple = field(default_factory=tuple)
    symmetrized: bool = False
    asymmetry: float = 0.0
    lower_bound: float = -math.inf
    upper_bound: float = math.inf

    @property
    def passed(self) -> bool:
        """Same as :attr:`is_psd` (the verifier convention)."""
        return self.is_psd

    @property
    def outcome(self) -> Outcome:
        """The verdict in the one outcome vocabulary (see :attr:`Verdict.outcome`)."""
        return self.verdict.outcome

    def _text(self) -> str:
        cert = "certified" if self.certified else "estimated"
        text = (
            f"{VERDICT_WORDS[self.verdict]} ({cert} by {self.method}; n={self.n}, "
            f"tol={self.tol.value:.3g}"
        )
        low, high = self.eigenvalue_interval()
        if math.isfinite(low) or math.isfinite(high):
            text += f", lambda_min in [{low:.3g}, {high:.3g}]"
        if self.witness_value is not None:
            text += f", witness v^T K v/v^T v={self.witness_value:.3g}"
        if self.symmetrized:
            text += f", symmetric part of K (max|K - K^T| = {self.asymmetry:.3g})"
        text += ")"
        if self.verdict is Verdict.INCONCLUSIVE and self.reason:
            text += f": {self.reason}"
        return text

    def first_failure(self) -> str:
        """For ``NOT_PSD``: the witness, its support and how far below ``-tol`` it lies.

        Returns
        -------
        str
            Empty for the other verdicts.
        """
        if self.verdict is not Verdict.NOT_PSD or self.witness_value is None:
            return ""
        support = np.flatnonzero(np.asarray([x != 0 for x in self.witness]))
        where = f"on indices {support[:8].tolist()}{'...' if support.size > 8 else ''}"
        return (
            f"K ({self.n} x {self.n}) is not PSD within tol = {self.tol.value:.3g} "
            f"({self.tol.source}): witness v {where} has v^T K v / v^T v = "
            f"{self.witness_value:.6g} (exact {self.witness_value_exact}), below -tol by "
            f"{-(self.witness_value + self.tol.value):.3g}; decided by the {self.method} rung"
        )

    def advice(self) -> str:
        """For ``INCONCLUSIVE``: why no rung decided (:attr:`reason`), else empty."""
        return self.reason if self.verdict is Verdict.INCONCLUSIVE else ""

    def eigenvalue_interval(self) -> tuple[float, float]:
        """``(low, high)`` containing ``lambda_min(K)``, rounded outward.

        The proven bounds (:attr:`lower_bound`, :attr:`upper_bound`)
        intersected with the estimate's interval under its error model
        (``min_eigenvalue -+ min_eigenvalue_error``, each end one float
        outward).
        """
        low, high = self.lower_bound, self.upper_bound
        if math.isfinite(self.min_eigenvalue) and math.isfinite(self.min_eigenvalue_error):
            e = self.min_eigenvalue_error
            low = max(low, float(np.nextafter(self.min_eigenvalue - e, -math.inf)))
            high = min(high, float(np.nextafter(self.min_eigenvalue + e, math.inf)))
        return (low, high)
