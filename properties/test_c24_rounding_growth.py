"""C24: what rounding does to a recurrence of transitions, measured against its bound.

* float32 computations of the delta rule (recurrent and chunked) are within
  the normwise bound of the 50-digit recurrence, for transitions that do not
  expand and for transitions that do (the bound then grows exponentially);
* the measured float32 error and the bound grow linearly in t while no
  transition expands: the bound's increments per token are about constant;
* expanding transitions (beta |k|^2 > 2) make the state and the bound grow
  exponentially, until the bound is infinite: no verdict is drawn there.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelcheck import attention as att
from kernelcheck._src.attention.families.delta.reference import DeltaSpec


def _inputs(seed, n, D, d_v, x_low, x_high):
    """Unit keys scaled so that beta |k|^2 lies in [x_low, x_high]."""
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((2, n, D))
    k /= np.linalg.norm(k, axis=-1, keepdims=True)
    beta = rng.uniform(x_low, x_high, n)
    return q, k, rng.standard_normal((n, d_v)), beta


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10**6), expand=st.booleans())
def test_c24_float32_errors_are_within_the_normwise_bound(seed, expand):
    n, D, d_v = 12, 3, 2
    q, k, v, beta = _inputs(seed, n, D, d_v, *((2.5, 3.0) if expand else (0.1, 1.0)))
    low = [x.astype(np.float32) for x in (q, k, v, beta)]
    exact = DeltaSpec.exact_output(tuple(np.float64(x) for x in low), {})
    tol = att.delta_error_bound(*low)
    for form in (att.delta_recurrent, att.delta_chunked):
        assert (np.abs(form(*low) - exact) <= tol).all()
    if expand:  # |M_t| >= 1.5: the bound grows at least geometrically
        per_token = tol.max(axis=-1) / np.linalg.norm(q, axis=-1)
        assert per_token[-1] > 10 * per_token[2]


@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 10**6))
def test_c24_the_bound_grows_linearly_while_no_transition_expands(seed):
    n, D, d_v = 256, 8, 2
    q, k, v, beta = _inputs(seed, n, D, d_v, 0.1, 1.0)
    bound = att.delta_error_bound(q, k, v, beta, dtype="float32")
    per_token = np.max(bound / np.linalg.norm(q, axis=-1)[:, None], axis=-1)
    first = per_token[n // 2 - 1] - per_token[n // 4 - 1]
    second = per_token[-1] - per_token[3 * n // 4 - 1]
    assert 1 / 3 < second / first < 3.0  # about equal increments: linear, not exponential
    low = [x.astype(np.float32) for x in (q, k, v, beta)]
    err = np.abs(att.delta_chunked(*low) - att.delta_recurrent(q, k, v, beta)).max(axis=-1)
    assert err.max() <= per_token.max() * np.linalg.norm(q, axis=-1).max()


@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 10**6))
def test_c24_expanding_transitions_blow_up_the_state_and_then_the_bound(seed):
    m, D = 64, 20
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((2, m, D))  # beta = 1: beta |k|^2 = |k|^2, about 20
    v, beta = rng.standard_normal((m, 2)), np.ones(m)
    _, S = att.delta_recurrent(q, k, v, beta, return_state=True)
    assert np.abs(S.S).max() > 1e10
    b32 = att.delta_error_bound(*(x.astype(np.float32) for x in (q, k, v, beta)))
    assert np.isinf(b32[-1]).all()
    b64 = att.delta_error_bound(q, k, v, beta)
    assert np.isfinite(b64[:4]).all() and b64[4].max() > b64[0].max()
