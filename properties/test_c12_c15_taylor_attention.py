"""C12, C15: truncated Taylor features in attention.

* C12: the Taylor map of order M, ``phi_M(x) . phi_M(y) = T_M(x . y)`` with
  ``T_M(s) = sum_{m <= M} s^m / m!``.  For even M, ``T_M(s) > 0`` for every
  real s, so attention normalisers ``sum_j T_M(q_i . k_j)`` are positive on
  every input; for odd M, ``T_M(s) -> -inf`` as ``s -> -inf``, so some inputs
  give normalisers ``<= 0`` (kernelcheck reports them, never adds an eps).
* C15: as M grows, Taylor linear attention converges to softmax attention.
  With ``kappa_ij = exp(s_ij)``, ``s_ij = q_i . k_j`` and the C12 remainder
  ``R_ij = |s_ij|^(M+1) e^max(s_ij, 0) / (M+1)! >= |exp(s_ij) - T_M(s_ij)|``,

      a_M,i - a_i = sum_j (T_M(s_ij) - kappa_ij)(v_j - a_i) / sum_j T_M(s_ij),

  so ``|a_M,i - a_i| <= sum_j R_ij |v_j - a_i| / (sum_j kappa_ij - sum_j R_ij)``
  whenever the denominator is positive; this bound tends to 0 with M on
  bounded inputs.  The computed outputs add their own rounding bounds
  (:func:`~kernelcheck.attention.softmax_error_bound`,
  :func:`~kernelcheck.attention.linear_error_bound` with the features' ``ops``).

Exact signs are checked with rational arithmetic (``fractions.Fraction``) on
the float inputs, independently of the code under test.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kernelcheck import attention as att
from kernelcheck._src.core.rounding import gamma
from kernelcheck.errors import BadNormalizer
from kernelcheck.kernels import Linear, exp

_MAPS: dict[int, object] = {}


def taylor(M: int):
    """The truncated Taylor feature map of exp(x . y) of order M (cached)."""
    if M not in _MAPS:
        _MAPS[M] = exp(Linear(), order=M).features()
    return _MAPS[M]


def _T_exact(s: Fraction, M: int) -> Fraction:
    return sum((s**m / math.factorial(m) for m in range(M + 1)), Fraction(0))


def _den_bound(pq, pk, ops):
    """Bound on |computed normaliser - exact| (the E_den of linear_error_bound)."""
    n, D = pq.shape[-2], pq.shape[-1]
    k = 2 * n + 2 * D + 4 + 2 * ops
    return gamma(k) * (1 + gamma(k)) * (np.abs(pq) @ np.abs(pk).sum(axis=-2))


@st.composite
def points(draw, max_norm):
    n = draw(st.integers(1, 8))
    d = draw(st.integers(1, 3))
    el = st.floats(-1.0, 1.0, allow_subnormal=False)
    Q = draw(hnp.arrays(np.float64, (n, d), elements=el))
    K = draw(hnp.arrays(np.float64, (n, d), elements=el))
    scale = max_norm / math.sqrt(d)  # rows of norm <= max_norm, so |q . k| <= max_norm^2
    V = draw(hnp.arrays(np.float64, (n, draw(st.integers(1, 3))), elements=st.floats(-10, 10)))
    return Q * scale, K * scale, V


@given(st.sampled_from([0, 2, 4, 6, 8]), points(max_norm=3.0))
def test_c12_even_orders_give_positive_normalisers(M, data):
    """C12: for even M every normaliser is positive, certified beyond its rounding bound."""
    Q, K, _ = data
    phi = taylor(M)
    pq, pk = phi(Q), phi(K)
    res = att.parallel(pq, pk, np.ones((Q.shape[0], 1)), causal=False, on_bad_normalizer="report")
    assert res.ok
    assert (res.normalizer > _den_bound(pq, pk, phi.ops)).all()
    causal = att.chunked(pq, pk, np.ones((Q.shape[0], 1)), chunk_size=3, on_bad_normalizer="report")
    assert causal.ok


@given(
    st.sampled_from([1, 3, 5, 7, 9]),
    hnp.arrays(
        np.float64, st.integers(1, 4), elements=st.floats(-1, 1, allow_subnormal=False)
    ).filter(lambda u: np.linalg.norm(u) > 0.1),
    st.integers(1, 6),
)
def test_c12_odd_orders_give_non_positive_normalisers(M, direction, n):
    """C12: for odd M, keys opposite to the query (s = -(M + 3)) give normalisers < 0;
    the same inputs with the even order M + 1 give positive ones."""
    q = direction / np.linalg.norm(direction) * math.sqrt(M + 3)
    Q = np.tile(q, (n, 1))
    K = -Q  # negation is exact
    V = np.ones((n, 1))
    s = -sum(Fraction(float(x)) ** 2 for x in q)  # the exact q . k of the float inputs
    assert _T_exact(s, M) < 0 < _T_exact(s, M + 1)
    phi = taylor(M)
    pq, pk = phi(Q), phi(K)
    with pytest.raises(BadNormalizer) as info:
        att.parallel(pq, pk, V)
    assert info.value.positions.tolist() == [[i] for i in range(n)]
    res = att.recurrent(pq, pk, V, on_bad_normalizer="report")
    assert res.bad_positions.tolist() == [[i] for i in range(n)]
    assert (res.normalizer + _den_bound(pq, pk, phi.ops) < 0).all()  # certainly negative
    even = taylor(M + 1)
    assert att.parallel(even(Q), even(K), V, on_bad_normalizer="report").ok


def _c15_bound(Q, K, V, A, EA, M):
    """sum_j R_ij (|v_j - a_i| + EA_i) / (sum_j kappa_ij - sum_j R_ij), inf where not positive."""
    s = Q @ K.T
    R = np.abs(s) ** (M + 1) * np.exp(np.maximum(s, 0.0)) / math.factorial(M + 1)
    kappa = np.exp(s)
    spread = np.abs(V[None, :, :] - A[:, None, :]) + EA[:, None, :]  # (i, j, m)
    num = np.einsum("ij,ijm->im", R, spread)
    den = kappa.sum(axis=1) - R.sum(axis=1)
    with np.errstate(divide="ignore"):
        bound = np.where(den[:, None] > 0, num / den[:, None], np.inf)
    # the bound's own evaluation: O(n + M) roundings on positive terms, and exp to 4 ulp
    n = Q.shape[0]
    return bound * (1 + gamma(2 * n + 2 * M + 16)) / (1 - gamma(2 * n + 2 * M + 16))


@given(points(max_norm=0.9))
def test_c15_taylor_attention_converges_to_softmax_all_orders(data):
    """C15: |q . k| <= 0.81: for every M = 1..12 the error obeys the C12-remainder bound,
    and the bound shrinks with M (the limit is softmax attention with scale 1)."""
    Q, K, V = data
    A = att.softmax(Q, K, V, scale=1.0)
    EA = att.softmax_error_bound(Q, K, V, scale=1.0)
    bounds = []
    for M in range(1, 13):
        phi = taylor(M)
        pq, pk = phi(Q), phi(K)
        AM = att.parallel(pq, pk, V)
        math_bound = _c15_bound(Q, K, V, A, EA, M)
        tol = math_bound + EA + att.linear_error_bound(pq, pk, V, extra_ops=2 * phi.ops)
        assert (np.abs(AM - A) <= tol).all()
        bounds.append(math_bound.max())
    assert all(b2 <= b1 for b1, b2 in zip(bounds[:-1], bounds[1:], strict=True))


@given(points(max_norm=2.0), st.booleans())
def test_c15_even_orders_converge_on_larger_inputs(data, causal):
    """C15: |q . k| <= 4, even M = 2..16 (normalisers positive by C12): error <= bound."""
    Q, K, V = data
    A = att.softmax(Q, K, V, scale=1.0, causal=causal)
    EA = att.softmax_error_bound(Q, K, V, scale=1.0, causal=causal)
    n = Q.shape[0]
    for M in range(2, 17, 2):
        phi = taylor(M)
        pq, pk = phi(Q), phi(K)
        AM = att.chunked(pq, pk, V, chunk_size=3) if causal else att.parallel(pq, pk, V)
        if causal:
            # the causal bound: sums over j <= i; evaluate row by row on the prefixes
            mb = np.vstack(
                [
                    _c15_bound(Q[i : i + 1], K[: i + 1], V[: i + 1], A[i : i + 1], EA[i : i + 1], M)
                    for i in range(n)
                ]
            )
        else:
            mb = _c15_bound(Q, K, V, A, EA, M)
        tol = mb + EA + att.linear_error_bound(pq, pk, V, causal=causal, extra_ops=2 * phi.ops)
        assert (np.abs(AM - A) <= tol).all()
