"""C1: softmax attention is a weighted average.

``a_i = sum_j w_ij v_j`` with ``w_ij >= 0`` and ``sum_j w_ij = 1`` (``j <= i``
when causal), so ``a_i`` lies in the convex hull of the ``v_j``.  The weights
are read from :func:`kernelcheck.attention.softmax` itself (``V = I_n`` makes
the output the weight matrix) and every relation is judged against
:func:`kernelcheck.attention.softmax_error_bound`; the logits range from
order 1 to the thousands, where an unshifted ``exp`` overflows.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kernelcheck import attention as att
from kernelcheck._src.core.rounding import gamma


@st.composite
def qkv(draw):
    batch = draw(st.sampled_from([(), (2,)]))
    n = draw(st.integers(1, 10))
    d = draw(st.integers(1, 5))
    d_v = draw(st.integers(1, 4))
    size = draw(st.sampled_from([1.0, 10.0, 60.0]))  # logits up to ~ size^2 * sqrt(d)
    elements = st.floats(-1.0, 1.0, allow_subnormal=False)
    Q = draw(hnp.arrays(np.float64, batch + (n, d), elements=elements)) * size
    K = draw(hnp.arrays(np.float64, batch + (n, d), elements=elements)) * size
    V = draw(hnp.arrays(np.float64, batch + (n, d_v), elements=st.floats(-1e3, 1e3)))
    return Q, K, V


@given(qkv(), st.booleans())
def test_c01_softmax_rows_are_convex_combinations(data, causal):
    """C1: weights >= 0, rows sum to 1, a_i = sum_j w_ij v_j lies in the hull of its v_j."""
    Q, K, V = data
    n = Q.shape[-2]
    eye = np.broadcast_to(np.eye(n), Q.shape[:-2] + (n, n))
    W = att.softmax(Q, K, eye, causal=causal)
    EW = att.softmax_error_bound(Q, K, eye, causal=causal)
    A = att.softmax(Q, K, V, causal=causal)
    EA = att.softmax_error_bound(Q, K, V, causal=causal)
    # Non-negative weights: exp and a division of non-negative numbers never go below 0.
    assert (W >= 0).all()
    allowed = np.tril(np.ones((n, n), bool)) if causal else np.ones((n, n), bool)
    if causal:
        assert (W[..., ~allowed] == 0).all()  # exp(-inf) is exactly 0: no future weight
    # Rows sum to one: each weight within EW of the exact one, plus the sum's own rounding.
    sums = W.sum(axis=-1)
    assert (np.abs(sums - 1.0) <= EW.sum(axis=-1) + gamma(n) * sums).all()
    # The output is the weighted average with these weights ...
    gap = np.abs(A - W @ V)
    assert (gap <= EA + EW @ np.abs(V) + gamma(n) * (W @ np.abs(V))).all()
    # ... so it lies in the convex hull (coordinatewise) of the values it averages.
    Vb = np.broadcast_to(V[..., None, :, :], V.shape[:-2] + (n, n, V.shape[-1]))
    lo = np.where(allowed[:, :, None], Vb, np.inf).min(axis=-2)
    hi = np.where(allowed[:, :, None], Vb, -np.inf).max(axis=-2)
    assert (A >= lo - EA).all() and (A <= hi + EA).all()


@given(qkv())
def test_c01_uniform_weights_for_repeated_keys(data):
    """C1: with every key equal, all weights are equal, so a_i is the mean of the v_j."""
    Q, K, V = data
    K = np.broadcast_to(K[..., :1, :], K.shape).copy()
    A = att.softmax(Q, K, V)
    mean = V.mean(axis=-2, keepdims=True)
    n = V.shape[-2]
    tol = att.softmax_error_bound(Q, K, V) + gamma(n + 1) * np.abs(V).mean(axis=-2, keepdims=True)
    assert (np.abs(A - mean) <= tol).all()
