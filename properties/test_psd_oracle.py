"""Claim C5: check_psd against an exact oracle on the audit's classes of hard matrices.

Every verdict, and every proven bound of ``lambda_min``, is checked against
exact rational arithmetic on the matrix actually decided -- the exact
symmetric part ``S = (K + K^T) / 2`` for near-symmetric input:

* ``POSITIVE_DEFINITE``: ``S`` is PD; ``POSITIVE_SEMIDEFINITE``: ``S + tol I``
  is PSD; ``NOT_PSD``: ``S + tol I`` is not PSD and the witness has
  ``v^T S v < -tol v^T v`` exactly;
* ``lower_bound``: ``S - lower_bound I`` is PSD; ``upper_bound``:
  ``S - upper_bound I`` is not PD (so ``lambda_min <= upper_bound``).

The classes: rank-deficient Grams, an eigenvalue at +-1e-17 relative,
graded matrices ``D A D``, Hilbert and Pascal matrices, extreme scales
(``2^+-1000``), near-equal rows, integer matrices, 1 x 1 and 2 x 2 edge cases
and one-ulp asymmetric matrices, at ``tol = 0`` and at the default
tolerance.  Zero wrong verdicts is the claim; the oracle is a rational
elimination written here, independent of kernelcheck's exact rung.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from kernelcheck.psd import Verdict, check_psd
from tests.psd.oracle import exact_kind


def _sym(K: np.ndarray) -> list[list[Fraction]]:
    n = K.shape[0]
    F = [[Fraction(float(K[i, j])) for j in range(n)] for i in range(n)]
    return [[(F[i][j] + F[j][i]) / 2 for j in range(n)] for i in range(n)]


def _kind(S: list[list[Fraction]], shift: Fraction = Fraction(0)) -> str:
    """'pd', 'psd' or 'not_psd' of ``S + shift I`` by rational symmetric elimination."""
    return exact_kind(S, shift)


def _quotient(S, v) -> Fraction:
    if isinstance(v, np.ndarray) and v.dtype.kind == "f":
        w = [Fraction(float(x)) for x in v]
    else:
        w = [Fraction(int(x)) for x in v]
    n = len(w)
    q = sum(w[i] * S[i][j] * w[j] for i in range(n) for j in range(n) if w[i] and w[j])
    return q / sum(x * x for x in w)


def _gram(X: np.ndarray) -> np.ndarray:
    return X @ X.T


@st.composite
def audit_matrices(draw) -> tuple[str, np.ndarray]:
    """One matrix of one of the audit's classes."""
    kind = draw(
        st.sampled_from(
            [
                "rank",
                "tiny_eig",
                "graded",
                "hilbert",
                "pascal",
                "extreme",
                "near_rows",
                "integer",
                "edge",
                "one_ulp",
            ]
        )
    )
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    n = draw(st.integers(1, 6))
    if kind == "rank":
        r = draw(st.integers(1, max(1, n - 1)))
        K = _gram(rng.standard_normal((n, r)))
    elif kind == "tiny_eig":
        Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
        lam = np.linspace(1.0, 2.0, n)
        lam[0] = draw(st.sampled_from([-1.0, 1.0])) * 1e-17
        K = (Q * lam) @ Q.T
        K = 0.5 * K + 0.5 * K.T
    elif kind == "graded":
        A = _gram(rng.standard_normal((n, n))) + draw(st.sampled_from([-0.5, 0.0, 1e-3])) * np.eye(
            n
        )
        d = np.ldexp(1.0, rng.integers(-200, 200, size=n))
        K = (A * d[:, None]) * d[None, :]
    elif kind == "hilbert":
        i = np.arange(n)
        K = 1.0 / (i[:, None] + i[None, :] + 1.0)
    elif kind == "pascal":
        from scipy.linalg import pascal

        K = pascal(n).astype(float)
        K[-1, -1] -= draw(st.sampled_from([0.0, 1.0]))  # det(pascal) = 1: minus 1 is singular
    elif kind == "extreme":
        A = _gram(rng.standard_normal((n, max(1, n - 1))))
        K = np.ldexp(A, draw(st.sampled_from([-1000, 1000])))
    elif kind == "near_rows":
        P = rng.standard_normal((n, 2))
        P[-1] = P[0] + 1e-9 * rng.standard_normal(2)
        K = np.exp(-0.5 * ((P[:, None, :] - P[None, :, :]) ** 2).sum(-1))
    elif kind == "integer":
        X = rng.integers(-3, 4, size=(n, draw(st.integers(1, n))))
        K = _gram(X).astype(float) - draw(st.sampled_from([0.0, 1.0])) * np.eye(n)
    elif kind == "edge":
        a, b, c = (draw(st.sampled_from([0.0, 1.0, -1.0, 2.0**-1074, 1e300, 0.5])) for _ in "abc")
        K = np.array([[a]]) if n == 1 else np.array([[a, b], [b, c]])
    else:  # one ulp off a singular PSD matrix
        X = rng.integers(-2, 3, size=(max(n, 2), max(n, 2) - 1)).astype(float)
        K = _gram(X)
        i, j = sorted(rng.choice(K.shape[0], size=2, replace=False))
        K[i, j] = np.nextafter(K[i, j], draw(st.sampled_from([-np.inf, np.inf])))
    return kind, np.asarray(K, dtype=np.float64)


@given(audit_matrices(), st.sampled_from([0.0, None]))
def test_check_psd_is_never_wrong_on_the_audit_classes(case, tol):
    kind, K = case
    r = check_psd(K, tol=tol, symmetrize=(kind == "one_ulp"))
    S = _sym(K)
    t = Fraction(r.tol.value)
    if r.verdict is Verdict.POSITIVE_DEFINITE:
        assert _kind(S) == "pd", (kind, r)
    elif r.verdict is Verdict.POSITIVE_SEMIDEFINITE:
        assert _kind(S, t) != "not_psd", (kind, r)
        assert r.certified or tol != 0.0
    elif r.verdict is Verdict.NOT_PSD:
        assert _kind(S, t) == "not_psd", (kind, r)
        assert _quotient(S, r.witness) < -t
    else:
        assert not r.certified
    if tol == 0.0 and r.certified:
        # the exact question, decided: the verdict is the oracle's
        expected = {"pd": Verdict.POSITIVE_DEFINITE, "psd": Verdict.POSITIVE_SEMIDEFINITE}
        assert expected.get(_kind(S), Verdict.NOT_PSD) is r.verdict
    # the proven bounds enclose lambda_min(S)
    if np.isfinite(r.lower_bound):
        assert _kind(S, -Fraction(r.lower_bound)) != "not_psd", (kind, r)
    if np.isfinite(r.upper_bound):
        assert _kind(S, -Fraction(r.upper_bound)) != "pd", (kind, r)
