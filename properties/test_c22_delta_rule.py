"""C22: the delta rule, its transition and its forms.

* one step is gradient descent on ``1/2 |S^T k - v|^2`` with step beta;
* the transition's spectral norm is ``max(1, |1 - beta |k|^2|)`` (its model
  ``rho`` is that number, and LAPACK's singular value agrees);
* the chunked form (WY/UT, every chunk size) and the parallel form agree
  with the recurrence within the sum of their bounds, for keys of any norm
  while the transitions do not expand, and against the 50-digit recurrence
  within the bound.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kernelcheck import attention as att
from kernelcheck._src.attention.common.transition_bound import transition_norms
from kernelcheck._src.attention.common.transitions import Transitions
from kernelcheck._src.attention.families.delta.reference import DeltaSpec
from kernelcheck._src.core.rounding import gamma


@st.composite
def delta_inputs(draw, max_n=20):
    """Queries, keys with beta |k|^2 in [0, 2] (non-expansive), values."""
    n = draw(st.integers(1, max_n))
    D = draw(st.integers(1, 5))
    d_v = draw(st.integers(1, 3))
    el = st.floats(-3, 3, allow_subnormal=False)
    q = draw(hnp.arrays(np.float64, (n, D), elements=el))
    k = draw(hnp.arrays(np.float64, (n, D), elements=el))
    k[np.sum(k * k, axis=-1) < 1e-6] = 1.0  # keys of a norm a float32 beta can scale
    v = draw(hnp.arrays(np.float64, (n, d_v), elements=st.floats(-10, 10)))
    x = draw(hnp.arrays(np.float64, (n,), elements=st.floats(0.0, 2.0)))
    norms = np.sum(k * k, axis=-1)
    beta = np.where(norms > 0, x / np.where(norms > 0, norms, 1.0), x)
    return q, k, v, beta


@settings(max_examples=30)
@given(
    D=st.integers(1, 6), d_v=st.integers(1, 4), beta=st.floats(0.0, 5.0), seed=st.integers(0, 99)
)
def test_c22_one_step_is_gradient_descent(D, d_v, beta, seed):
    rng = np.random.default_rng(seed)
    S, k, v = rng.standard_normal((D, d_v)), rng.standard_normal(D), rng.standard_normal(d_v)
    new, _ = att.delta_recurrence().step(att.State(S), k, k, v, beta)
    step = S - beta * np.outer(k, S.T @ k - v)
    mag = np.abs(S) + beta * np.outer(np.abs(k), np.abs(S.T) @ np.abs(k) + np.abs(v))
    assert (np.abs(new.S - step) <= 2 * gamma(D + 6) * mag).all()


@settings(max_examples=30)
@given(D=st.integers(2, 6), x=st.floats(0.0, 20.0), seed=st.integers(0, 99))
def test_c22_the_transition_norm_is_max_1_and_1_minus_beta_k2(D, x, seed):
    """For D >= 2 (for D = 1 the norm is |1 - beta k^2|, which ``rho`` bounds)."""
    k = np.random.default_rng(seed).standard_normal(D)
    beta = x / float(k @ k)
    rho, _ = transition_norms(Transitions(k[None], k[None], np.zeros((1, 1)), -beta * k[None]))
    exact = max(1.0, abs(1.0 - beta * float(k @ k)))
    svd = np.linalg.norm(np.eye(D) - beta * np.outer(k, k), 2)
    assert rho[0] >= exact and rho[0] <= exact * (1 + 1e-12)
    assert abs(svd - exact) <= 1e-12 * exact


@settings(max_examples=25)
@given(delta_inputs(), st.integers(1, 9))
def test_c22_chunked_and_parallel_forms_agree_with_the_recurrence(inputs, chunk):
    q, k, v, beta = inputs
    ref = att.delta_recurrent(q, k, v, beta)
    tol = att.delta_error_bound(q, k, v, beta)
    for out in (att.delta_chunked(q, k, v, beta, chunk_size=chunk),
                att.delta_parallel(q, k, v, beta)):  # fmt: skip
        assert (np.abs(out - ref) <= 2 * tol).all()


@settings(max_examples=10, deadline=None)
@given(delta_inputs(max_n=10), st.booleans())
def test_c22_every_form_is_within_its_bound_of_the_exact_recurrence(inputs, l2):
    q, k, v, beta = inputs
    kw = {"qk_l2norm": l2}
    exact = DeltaSpec.exact_output((q, k, v, beta), kw)
    low = [x.astype(np.float32) for x in inputs]
    for dtype_args in (inputs, low):
        tol = att.delta_error_bound(*dtype_args, **kw)
        exact_here = DeltaSpec.exact_output(tuple(np.float64(x) for x in dtype_args), kw)
        for form in (att.delta_recurrent, att.delta_chunked):
            assert (np.abs(form(*dtype_args, **kw) - exact_here) <= tol).all()
    assert exact.shape == v.shape
