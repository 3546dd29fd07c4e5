"""C10, C11, C14: the forms of kernelized attention agree, and the state does not grow.

* C10: ``sum_j kappa(q_i, k_j) v_j / sum_j kappa(q_i, k_j)`` computed from the
  Gram block (:func:`kernelcheck.attention.kernelized`) equals
  ``phi(q_i)^T S / phi(q_i)^T z`` from the feature map
  (:func:`kernelcheck.attention.parallel`) for every finite feature map of the
  kernel algebra (random expression trees, symmetric and tensor forms).
* C14: the recurrence (:func:`~kernelcheck.attention.recurrent`), the causal
  parallel form (prefix sums) and the chunked form agree for any chunk size,
  divisor of n or not, batched or not.
* C11: the recurrent state holds ``D (d_v + 1)`` numbers whatever n.

Every comparison uses the two forms' a-priori error bounds (each form is
within its bound of the exact value, so two forms are within the sum).  Where
a normaliser's sign is not certain the bound is infinite and the entry is not
judged; those are exactly the entries where a form may report a bad
normaliser (C12).
"""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kernelcheck import attention as att
from kernelcheck.strategies import feature_maps


def _agree(a, b, tol):
    """Entries with a finite tolerance agree within it (the rest: sign of normaliser uncertain)."""
    judged = np.isfinite(tol)
    with np.errstate(invalid="ignore"):  # inf - inf at a zero normaliser: not judged
        diff = np.abs(a - b)
    return bool((diff[judged] <= tol[judged]).all())


@st.composite
def qkv_points(draw, max_norm=1.5):
    batch = draw(st.sampled_from([(), (2,)]))
    n = draw(st.integers(1, 8))
    d = draw(st.integers(1, 3))
    d_v = draw(st.integers(1, 3))
    el = st.floats(-1.0, 1.0, allow_subnormal=False)
    Q = draw(hnp.arrays(np.float64, batch + (n, d), elements=el))
    K = draw(hnp.arrays(np.float64, batch + (n, d), elements=el))
    V = draw(hnp.arrays(np.float64, batch + (n, d_v), elements=st.floats(-10, 10)))
    scale = max_norm / np.sqrt(d)
    return Q * scale, K * scale, V


def _rows(phi, X):
    """phi applied row-wise to an array with leading batch dimensions."""
    return phi(X.reshape(-1, X.shape[-1])).reshape(X.shape[:-1] + (-1,))


@given(feature_maps(max_depth=3, max_features=300, feature_dim_at=3), qkv_points(), st.booleans())
def test_c10_kernelized_equals_parallel_for_every_finite_feature_map(phi, data, causal):
    """C10: the quadratic form with kappa equals the factorized form with phi."""
    Q, K, V = data
    k = phi.kernel
    exact = att.kernelized(Q, K, V, k, causal=causal, on_bad_normalizer="report")
    pq, pk = _rows(phi, Q), _rows(phi, K)
    fact = att.parallel(pq, pk, V, causal=causal, on_bad_normalizer="report")
    tol = att.kernelized_error_bound(Q, K, V, k, causal=causal) + att.linear_error_bound(
        pq, pk, V, causal=causal, extra_ops=2 * phi.ops
    )
    assert _agree(exact.out, fact.out, tol)
    # A normaliser certainly positive (finite tolerance) is never reported as bad.
    for res in (exact, fact):
        bad = np.zeros(res.normalizer.shape, bool)
        bad[tuple(res.bad_positions.T)] = True
        assert not (bad[..., None] & np.isfinite(tol)).any()


@st.composite
def features(draw, signed=False):
    batch = draw(st.sampled_from([(), (3,)]))
    n = draw(st.integers(1, 20))
    D = draw(st.integers(1, 6))
    d_v = draw(st.integers(1, 4))
    lo = -1.0 if signed else 0.0
    el = st.floats(lo, 1.0, allow_subnormal=False)
    scale = draw(st.sampled_from([1.0, 1e-3, 1e3]))
    pq = draw(hnp.arrays(np.float64, batch + (n, D), elements=el)) * scale
    pk = draw(hnp.arrays(np.float64, batch + (n, D), elements=el))
    if not signed:
        pk = pk + 1e-3  # keys strictly positive: every normaliser with a nonzero phi_q is > 0
        pq = pq + 1e-3 * scale
    V = draw(hnp.arrays(np.float64, batch + (n, d_v), elements=st.floats(-100, 100)))
    chunk = draw(st.integers(1, n + 3))
    return pq, pk, V, chunk


#: The forms of linear attention (C14), from the registry.
LINEAR_FORMS = att.get_family("linear").forms


def _causal(form, pq, pk, V, chunk, **kw):
    """The form's causal output, in chunks of ``chunk`` tokens where it has chunks."""
    if "chunk_size" in form.options:
        kw["chunk_size"] = chunk
    return form.call(pq, pk, V, causal=True, **kw)


@given(features())
def test_c14_recurrent_parallel_chunked_agree(data):
    """C14: recurrence = causal parallel (prefix sums) = chunked, any chunk size: every
    form of the linear family agrees with every other."""
    pq, pk, V, chunk = data
    bound = att.linear_error_bound(pq, pk, V, causal=True)
    assert np.isfinite(bound).all()  # positive features: every normaliser certainly > 0
    outs = [_causal(form, pq, pk, V, chunk) for form in LINEAR_FORMS]
    tol = 2 * bound
    for a, b in itertools.combinations(outs, 2):
        assert _agree(a, b, tol)


@given(features(signed=True))
def test_c14_forms_agree_with_signed_features(data):
    """C14 with signed features: where every normaliser's sign is certain the forms agree;
    a bad normaliser is reported only where the sign is uncertain or certainly <= 0."""
    pq, pk, V, chunk = data
    tol = 2 * att.linear_error_bound(pq, pk, V, causal=True)
    outs = [_causal(form, pq, pk, V, chunk, on_bad_normalizer="report") for form in LINEAR_FORMS]
    for res in outs[1:]:
        assert _agree(res.out, outs[0].out, tol)
    for res in outs:
        bad = np.zeros(res.normalizer.shape, bool)
        bad[tuple(res.bad_positions.T)] = True
        assert not (bad & np.isfinite(tol[..., 0])).any()


@given(st.integers(1, 6), st.integers(1, 4), st.lists(st.integers(1, 40), min_size=2, max_size=4))
def test_c11_state_size_independent_of_n(D, d_v, lengths):
    """C11: after n tokens the state (S, z) still holds D (d_v + 1) numbers, for every n."""
    rng = np.random.default_rng(D * 100 + d_v)
    seen = set()
    for n in lengths:
        pq, pk = rng.random((2, n, D)) + 0.1
        _, state = att.recurrent(pq, pk, rng.normal(size=(n, d_v)), return_state=True)
        seen.add((state.S.shape, state.z.shape, state.size, state.nbytes))
        cost = att.cost_model("recurrent", n, 1, D, d_v)
        assert cost.state_size == state.size
    assert seen == {((D, d_v), (D,), D * (d_v + 1), 8 * D * (d_v + 1))}
    per_token = {
        att.cost_model(f, n, 1, D, d_v).flops_per_token() for n in lengths for f in ("recurrent",)
    }
    assert len(per_token) == 1  # the work per token does not depend on n either
