"""C23: one transition for all of them, the diagonal-plus-rank-one ``M_t = Diag(w_t) + a_t b_t^T``.

* the delta rule, Gated DeltaNet and Kimi Delta Attention are the DPLR
  recurrence with their factors (within the sum of the two forms' bounds);
* the model's bound on the transition's spectral norm (a 2 x 2 reduction)
  is never below LAPACK's singular value, and equals it for one decay on
  every channel;
* the DPLR chunked form agrees with its recurrence for every chunk size, and
  a state handed over at any cut (inside a chunk too) gives one pass.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelcheck import attention as att
from kernelcheck._src.attention.common.transition_bound import transition_norms
from kernelcheck._src.attention.common.transitions import Transitions


def _draw(seed, n, D, d_v, spread):
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((2, n, D))
    kappa = rng.standard_normal((n, D))
    kappa /= np.linalg.norm(kappa, axis=-1, keepdims=True)
    a, b = -kappa, spread * kappa * rng.uniform(0, 1, (n, D))
    w = rng.uniform(0.3, 1.0, (n, D))
    return q, k, rng.standard_normal((n, d_v)), a, b, w, rng


@settings(max_examples=25)
@given(seed=st.integers(0, 10**6), n=st.integers(1, 24), D=st.integers(1, 5),
       d_v=st.integers(1, 3))  # fmt: skip
def test_c23_the_delta_families_are_the_dplr_recurrence(seed, n, D, d_v):
    q, k, v, _, _, w, rng = _draw(seed, n, D, d_v, 1.0)
    k /= np.maximum(np.linalg.norm(k, axis=-1, keepdims=True), 1e-300)
    beta = rng.uniform(0, 1, (n, 1))
    g = w[:, :1]
    cases = [
        ((q, k, beta * v, g * k, -beta * k, np.repeat(g, D, 1)),
         att.gated_delta_recurrent(q, k, v, g[:, 0], beta[:, 0]),
         att.gated_delta_error_bound(q, k, v, g[:, 0], beta[:, 0])),
        ((q, k, beta * v, w * k, -beta * k, w), att.kda_recurrent(q, k, v, w, beta[:, 0]),
         att.kda_error_bound(q, k, v, w, beta[:, 0])),
    ]  # fmt: skip
    for dplr_args, ref, tol in cases:
        got = att.dplr_chunked(*dplr_args, chunk_size=4)
        total = tol + att.dplr_error_bound(*dplr_args, extra_ops=2)
        assert (np.abs(got - ref) <= 2 * total).all()


@settings(max_examples=40)
@given(seed=st.integers(0, 10**6), D=st.integers(1, 6), spread=st.floats(0.0, 4.0),
       scalar=st.booleans())  # fmt: skip
def test_c23_the_transition_norm_bound_is_above_the_singular_value(seed, D, spread, scalar):
    """Equal for one decay on every channel and D >= 2 (D = 1 has no direction left fixed)."""
    _, _, _, a, b, w, _ = _draw(seed, 8, D, 1, spread)
    if scalar:
        w = np.repeat(w[:, :1], D, axis=1)
    rho, _ = transition_norms(Transitions(a, a, np.zeros((8, 1)), a, b, np.log(w)))
    svd = np.array([np.linalg.norm(np.diag(x) + np.outer(y, z), 2) for x, y, z in zip(w, b, a)])
    assert (rho >= svd * (1 - 1e-13)).all()
    if scalar and D >= 2:
        assert np.allclose(rho, svd, rtol=1e-9)


@settings(max_examples=20)
@given(seed=st.integers(0, 10**6), n=st.integers(2, 30), chunk=st.integers(1, 9),
       cut=st.integers(1, 29))  # fmt: skip
def test_c23_chunked_and_recurrent_forms_agree_and_hand_over_inside_a_chunk(seed, n, chunk, cut):
    q, k, v, a, b, w, _ = _draw(seed, n, 4, 2, 1.0)
    cut = min(cut, n - 1)
    args = (q, k, v, a, b, w)
    ref, S = att.dplr_recurrent(*args, return_state=True)
    tol = att.dplr_error_bound(*args)
    assert (np.abs(att.dplr_chunked(*args, chunk_size=chunk) - ref) <= 2 * tol).all()
    first, mid = att.dplr_chunked(*(x[:cut] for x in args), chunk_size=chunk, return_state=True)
    rest, end = att.dplr_chunked(*(x[cut:] for x in args), chunk_size=chunk,
                                 initial_state=mid, return_state=True)  # fmt: skip
    assert (np.abs(np.concatenate([first, rest]) - ref) <= 2 * tol).all()
    assert np.abs(end.S - S.S).max() <= 4 * np.abs(tol).max() + 1e-300
