"""More unit tests of kernelcheck.attention: relations the other test files leave open.

Cost model counts against an independent enumeration of the pairs and chunks;
the error bounds against the formulas their docstrings state (the reference
whose origin is each docstring); the threaded chunked path against the
recurrence; result objects' derived quantities and one-line verdicts.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from kernelcheck import attention as A
from kernelcheck._src.attention import forms as _att
from kernelcheck._src.core.rounding import gamma, unit_roundoff
from kernelcheck.errors import BadNormalizer, InvalidArgument, NumericalFailure
from kernelcheck.kernels import Exponential, Linear, Polynomial

RNG = np.random.default_rng(7)
U = unit_roundoff(np.float64)
ETA = float(np.finfo(np.float64).smallest_subnormal)


# ---------------------------------------------------------------------------
# cost_model: counts from an explicit enumeration (C2, C3, C11)
# ---------------------------------------------------------------------------


def _pairs_formed_by_softmax(n, causal, monkeypatch):
    """Logits softmax actually forms for one sequence: the entries passed to exp."""
    counted = []
    real_exp = np.exp

    def counting_exp(x, *args, **kwargs):
        counted.append(np.size(x))
        return real_exp(x, *args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(_att.np, "exp", counting_exp)
        A.softmax(np.zeros((n, 1)), np.zeros((n, 1)), np.zeros((n, 1)), causal=causal)
    return sum(counted)


def _pairs_formed_by_kernelized(n, causal):
    """Gram entries kernelized asks its kernel for, recorded by the kernel itself."""
    sizes = []

    def kernel(X, Y):
        sizes.append(X.shape[0] * Y.shape[0])
        return np.ones((X.shape[0], Y.shape[0]))

    A.kernelized(np.zeros((n, 1)), np.zeros((n, 1)), np.zeros((n, 1)), kernel, causal=causal)
    return sum(sizes)


def _chunks(n, C):
    """Chunk lengths, from cutting range(n) into consecutive pieces of at most C."""
    return [len(range(n)[i : i + C]) for i in range(0, n, C)]


SIZES = [(1, 1, 1, 1, 1), (7, 3, 5, 2, 3), (16, 4, 6, 3, 16), (10, 2, 3, 4, 64), (9, 5, 2, 1, 4)]


@pytest.mark.parametrize("n, d, D, dv, C", SIZES + [(40, 2, 2, 2, 8), (100, 1, 1, 1, 1)])
@pytest.mark.parametrize("causal", [False, True])
def test_cost_model_exact_forms_count_the_pairs_the_forms_form(n, d, D, dv, C, causal, monkeypatch):
    P = _pairs_formed_by_softmax(n, causal, monkeypatch)
    assert P == (n * n if not causal else P)
    assert P >= (n * (n + 1)) // 2  # at least the pairs the mask keeps
    soft = A.cost_model("softmax", n, d, D, dv, C, causal=causal)
    # per pair: a length-d dot product (2d), max/exp/sum (3), a length-dv axpy (2dv);
    # per row: the division (dv), the query scaling (d), the output check (2 dv)
    assert soft.flops == P * (2 * d + 3 + 2 * dv) + n * dv + n * d + 2 * n * dv
    assert soft.state_size == n * (d + dv)  # the key/value cache grows with n (C2)
    Pk = _pairs_formed_by_kernelized(n, causal)
    ker = A.cost_model("kernelized", n, d, D, dv, C, causal=causal)
    # per Gram entry formed: 2d + 1 for the kernel, 2 (dv + 1) for the products
    assert ker.flops == Pk * (2 * d + 1) + 2 * Pk * (dv + 1) + n * dv
    assert ker.state_size == n * (d + dv)
    assert (soft.causal, ker.causal) == (causal, causal)
    assert (soft.n, soft.d, soft.D, soft.d_v, soft.chunk_size) == (n, d, D, dv, C)


@pytest.mark.parametrize("n, d, D, dv, C", SIZES)
def test_cost_model_linear_forms_state_is_the_recurrent_state(n, d, D, dv, C):
    state = A.init(D, dv)
    for form, causal in (("parallel", False), ("parallel", True), ("recurrent", True)):
        cost = A.cost_model(form, n, d, D, dv, C, causal=causal)
        assert cost.state_size == state.size  # C11: D (d_v + 1), whatever n
        # one step per token: 4 D (d_v + 1) for the state update and the contraction
        assert cost.flops == n * (4 * D * (dv + 1) + dv)
    chunked = A.cost_model("chunked", n, d, D, dv, C)
    sizes = _chunks(n, C)
    within = sum(2 * c * c * (D + dv + 1) for c in sizes)
    across = 4 * n * D * (dv + 1) + len(sizes) * D * (dv + 1) + n * (dv + 1) + n * dv
    assert chunked.flops == within + across
    assert chunked.state_size == state.size
    assert chunked.causal is True


def test_cost_model_defaults_and_per_token_growth():
    assert A.cost_model("softmax", 8, 2, 2, 2).causal is False
    assert A.cost_model("parallel", 8, 2, 2, 2).causal is False
    assert A.cost_model("recurrent", 8, 2, 2, 2).causal is True
    assert A.cost_model("chunked", 8, 2, 2, 2).chunk_size == 64
    # C3: flops per token constant in n for the linear forms, growing for softmax (C2)
    lin = [A.cost_model("recurrent", n, 4, 8, 4).flops_per_token() for n in (10, 100, 1000)]
    assert lin[0] == lin[1] == lin[2] == 4 * 8 * 5 + 4
    soft = [A.cost_model("softmax", n, 4, 8, 4).flops_per_token() for n in (10, 100)]
    # per token: n (2d + 3 + 2dv) + (dv + d + 2 dv), so the n-dependent part grows tenfold
    assert soft[1] - 16 == 10 * (soft[0] - 16)
    cost = A.cost_model("chunked", 10, 4, 8, 4, 3)
    assert cost.flops_per_token() == cost.flops / 10
    text = str(cost)
    assert text.startswith(f"chunked (causal), n=10: {cost.flops:.3e} flops, ")
    assert str(A.cost_model("parallel", 10, 4, 8, 4)).startswith("parallel (bidirectional), n=10")
    d = cost.to_dict()
    assert d["flops"] == cost.flops and d["form"] == "chunked"


# ---------------------------------------------------------------------------
# Result objects
# ---------------------------------------------------------------------------


def test_state_size_and_bytes():
    s = A.init(5, 3, batch_shape=(2, 4))
    assert s.S.shape == (2, 4, 5, 3) and s.z.shape == (2, 4, 5)
    assert s.size == 2 * 4 * 5 * (3 + 1)
    assert s.nbytes == 8 * s.size
    s32 = A.init(5, 3, dtype=np.float32)
    assert s32.S.dtype == s32.z.dtype == np.float32
    assert s32.nbytes == 4 * s32.size


def test_attention_output_report_fields_and_text():
    phi = np.array([[1.0], [-1.0], [2.0]])
    V = np.array([[1.0], [2.0], [3.0]])
    res = A.parallel(phi, phi, V, causal=True, on_bad_normalizer="report")
    # normalisers are phi_i * sum_{j <= i} phi_j: 1, -1 * 0 = -0, 2 * 2 = 4
    assert np.array_equal(res.normalizer, [1.0, 0.0, 4.0])
    assert res.bad_positions.tolist() == [[1]]
    assert not res.ok
    assert np.array_equal(res.bad_values, [0.0])
    assert str(res) == (
        "attention output of shape (3, 1); 1 of 3 normalisers <= 0 (first at (1,): 0)"
    )
    good = A.parallel(np.abs(phi), np.abs(phi), V, on_bad_normalizer="report")
    assert good.ok and good.bad_positions.shape == (0, 1)
    assert str(good) == "attention output of shape (3, 1); all 3 normalisers > 0"
    assert np.array_equal(good.out, A.parallel(np.abs(phi), np.abs(phi), V))
    with pytest.raises(BadNormalizer) as info:
        A.parallel(phi, phi, V, causal=True)
    assert info.value.positions.tolist() == [[1]]
    assert str(info.value).startswith(
        "1 of 3 attention normalisers are <= 0 in `parallel` (first at position (1,): 0); "
        "the features are not positive (odd Taylor order or trigonometric features, claim "
        "C12). kernelcheck never adds an eps: pass on_bad_normalizer='report' to get the "
        "raw output with the bad positions"
    )


def test_step_report_and_recurrent_state():
    s = A.init(2, 1)
    s, y = A.step(s, [1.0, 0.0], [1.0, 0.0], [3.0], on_bad_normalizer="report")
    assert y.ok and np.array_equal(y.out, [3.0]) and np.array_equal(y.normalizer, 1.0)
    s, y = A.step(s, [0.0, 1.0], [1.0, 0.0], [5.0], on_bad_normalizer="report")
    assert not y.ok  # phi(q) . z = 0
    pq = np.abs(RNG.normal(size=(6, 3)))
    pk = np.abs(RNG.normal(size=(6, 3)))
    V = RNG.normal(size=(6, 2))
    out, state = A.recurrent(pq, pk, V, return_state=True)
    assert np.allclose(state.S, pk.T @ V) and np.allclose(state.z, pk.sum(axis=0))
    assert state.size == A.init(3, 2).size
    assert np.array_equal(out, A.recurrent(pq, pk, V))
    rep = A.recurrent(pq, pk, V, on_bad_normalizer="report")
    assert rep.ok and np.array_equal(rep.out, out)


# ---------------------------------------------------------------------------
# Blocked and threaded paths agree with the simple ones
# ---------------------------------------------------------------------------


def test_chunked_threaded_path_matches_recurrence(monkeypatch):
    """Above the parallel-work threshold the chunk products run on worker threads."""
    n, D, dv = 600, 8, 3
    pq = RNG.random((2, n, D)) + 0.05
    pk = RNG.random((2, n, D)) + 0.05
    V = RNG.normal(size=(2, n, dv))
    monkeypatch.setattr(_att, "_PARALLEL_WORK", 1)  # force the worker path at this size
    calls = []
    real = _att._split

    def spy(fn, k, workers):
        calls.append((k, workers.size))
        return real(fn, k, workers)

    monkeypatch.setattr(_att, "_split", spy)
    out = A.chunked(pq, pk, V, chunk_size=7)
    assert calls and all(k == n // 7 for k, _ in calls[:2])
    ref = A.parallel(pq, pk, V, causal=True)
    bound = A.linear_error_bound(pq, pk, V, causal=True)
    assert np.all(np.abs(out - ref) <= 2 * bound)


def test_split_covers_the_range_once_with_a_pool():
    from concurrent.futures import ThreadPoolExecutor

    seen = []
    with ThreadPoolExecutor(max_workers=3) as pool:
        _att._split(lambda lo, hi: seen.append((lo, hi)), 10, _att._Workers(pool, 3))
    assert sorted(seen) == [(0, 3), (3, 7), (7, 10)]
    seen.clear()
    _att._split(lambda lo, hi: seen.append((lo, hi)), 1, _att._Workers(object(), 4))
    assert seen == [(0, 1)]
    seen.clear()
    _att._split(lambda lo, hi: seen.append((lo, hi)), 5, _att._Workers(None, 1))
    assert seen == [(0, 5)]


def test_chunk_workers_limit_blas_inside_and_restore_after():
    controller = _att._blas_controller()
    if controller is None:
        pytest.skip("threadpoolctl cannot inspect the BLAS library here")
    before = [lib.num_threads for lib in controller.lib_controllers]
    with _att._chunk_workers(True) as workers:
        inside = [lib.num_threads for lib in _att._blas_controller().lib_controllers]
        if max(before) >= 2:
            assert workers.pool is not None and workers.size == max(before)
            assert inside == [1] * len(inside)
        else:
            assert workers.pool is None and workers.size == 1
    with _att._chunk_workers(False) as workers:
        assert workers.pool is None and workers.size == 1
    after = [lib.num_threads for lib in controller.lib_controllers]
    assert after == before


def test_blocked_paths_match_unblocked(monkeypatch):
    """Tiny block sizes force every multi-block loop; results equal the one-block ones."""
    pq = RNG.random((2, 9, 3)) + 0.05
    pk = RNG.random((2, 9, 3)) + 0.05
    Q, K = RNG.normal(size=(2, 2, 9, 3))
    V = RNG.normal(size=(2, 9, 2))

    def forms():
        return {
            "softmax": A.softmax(Q, K, V),
            "softmax-causal": A.softmax(Q, K, V, causal=True),
            "kernelized-causal": A.kernelized(Q, K, V, Exponential(0.5), causal=True),
            "parallel-causal": A.parallel(pq, pk, V, causal=True),
            "chunked": A.chunked(pq, pk, V, chunk_size=2),
            "keb": A.kernelized_error_bound(Q, K, V, Exponential(0.5), causal=True),
        }

    expected = forms()
    monkeypatch.setattr(_att, "_BLOCK_ELEMENTS", 20)
    got = forms()
    for key in expected:
        assert np.allclose(got[key], expected[key], rtol=64 * U, atol=0), key


def test_causal_masks_are_exact_on_a_structured_example():
    """Keys j > i must not contribute: make them huge and check the outputs are unaffected."""
    n = 6
    V = np.arange(n, dtype=float)[:, None]
    Q = K = np.zeros((n, 2))
    # all logits 0: causal softmax is the running mean of V (exact reference)
    expected = np.cumsum(V, axis=0) / np.arange(1, n + 1)[:, None]
    assert np.allclose(A.softmax(Q, K, V, causal=True), expected, rtol=8 * U)
    assert np.allclose(A.kernelized(Q, K, V, Exponential(), causal=True), expected, rtol=8 * U)
    ones = np.ones((n, 1))
    for out in (
        A.parallel(ones, ones, V, causal=True),
        A.recurrent(ones, ones, V),
        A.chunked(ones, ones, V, chunk_size=4),
        A.chunked(ones, ones, V, chunk_size=1),
        A.chunked(ones, ones, V, chunk_size=100),
    ):
        assert np.allclose(out, expected, rtol=8 * U)
    # bidirectional: every row is the mean
    assert np.allclose(A.parallel(ones, ones, V), V.mean(), rtol=8 * U)
    assert np.allclose(A.softmax(Q, K, V), V.mean(), rtol=8 * U)


# ---------------------------------------------------------------------------
# Error bounds: the formulas of the docstrings, evaluated independently
# ---------------------------------------------------------------------------


def _quotient(absH, E, den):
    """Docstring of _quotient_bound: (E_num + R E_den) / lo1 + u R (1 + u)."""
    E_num, E_den = E[..., :-1], E[..., -1:]
    den = den[..., None]
    lo1, lo2 = den - E_den, den - 2 * E_den
    R = (absH[..., :-1] + E_num) / lo2
    err = (E_num + R * E_den) / lo1 + U * R * (1 + U)
    return np.where(lo2 > 0, err, np.inf)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("extra", [0, 3])
def test_linear_error_bound_is_the_docstring_formula(causal, extra):
    n, D, dv = 7, 3, 2
    pq = RNG.random((n, D)) + 0.1
    pk = RNG.random((n, D)) + 0.1
    V = RNG.normal(size=(n, dv))
    W = np.hstack([V, np.ones((n, 1))])
    kappa = pq @ pk.T
    if causal:
        kappa = np.tril(kappa)
    absH = kappa @ np.abs(W)  # kappa >= 0 here
    H = kappa @ W
    k = 2 * n + 2 * D + 4
    g64 = gamma(k)
    E = gamma(k + extra) * (1 + g64) * absH
    under = 3 * n * D * ETA * (1 + pq.max()) * (1 + pk.max()) * (1 + np.abs(W).max())
    expected = _quotient(absH * (1 + g64), E + under, H[:, -1])
    got = A.linear_error_bound(pq, pk, V, causal=causal, extra_ops=extra)
    assert np.allclose(got, expected, rtol=1e3 * U, atol=0)
    # float32 adds the float64 model of the reference normaliser
    got32 = A.linear_error_bound(pq, pk, V, causal=causal, extra_ops=extra, dtype=np.float32)
    u32 = unit_roundoff(np.float32)
    E32 = gamma(k + extra, np.float32) * (1 + g64) * absH + g64 * (1 + g64) * absH
    under32 = (
        3
        * n
        * D
        * float(np.finfo(np.float32).smallest_subnormal)
        * (1 + pq.max())
        * (1 + pk.max())
        * (1 + np.abs(W).max())
    )
    E32 = E32 + under32
    E_num, E_den = E32[:, :-1], E32[:, -1:]
    den = H[:, -1:]
    R = (absH[:, :-1] * (1 + g64) + E_num) / (den - 2 * E_den)
    expected32 = (E_num + R * E_den) / (den - E_den) + u32 * R * (1 + u32)
    assert np.allclose(got32, expected32, rtol=1e3 * U, atol=0)


def test_linear_error_bound_is_inf_where_the_sign_is_uncertain():
    pq = np.array([[1.0], [-1.0], [1.0]])
    V = np.ones((3, 1))
    E = A.linear_error_bound(pq, pq, V, causal=True)
    # normalisers 1, 0 (exactly: 1 - 1), 1: the middle one's sign is uncertain
    assert np.isfinite(E[0]).all() and np.isinf(E[1]).all() and np.isfinite(E[2]).all()


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("extra, dtype", [(0, None), (2, np.float32)])
def test_softmax_error_bound_is_the_docstring_formula(causal, extra, dtype):
    n, d, dv = 6, 3, 2
    Q, K = RNG.normal(size=(2, n, d))
    V = RNG.normal(size=(n, dv))
    scale = 0.7
    u = unit_roundoff(dtype or np.float64)
    eta = float(np.finfo(dtype or np.float64).smallest_subnormal)
    got = A.softmax_error_bound(Q, K, V, causal=causal, scale=scale, dtype=dtype, extra_ops=extra)
    for i in range(n):
        J = range(i + 1) if causal else range(n)
        kmax = np.abs(K[list(J)]).max(axis=0)
        vmax = np.abs(V[list(J)]).max(axis=0)
        r = scale * np.abs(Q[i]) @ kmax * (1 + gamma(d + 2))
        theta = gamma(d + 2 + extra, dtype or np.float64) * r + 2 * u * r + 5 * u
        gn = gamma(n + extra, dtype or np.float64)
        factor = math.expm1(2 * theta) * (1 + u) + 2 * gn / (1 - gn) + u
        expected = (factor * vmax + (3 * n + 2) * eta * (1 + vmax)) * (1 + gamma(6))
        assert np.allclose(got[i], expected, rtol=1e3 * U, atol=0)
    default = A.softmax_error_bound(Q, K, V, causal=causal)
    explicit = A.softmax_error_bound(Q, K, V, causal=causal, scale=1 / math.sqrt(d))
    assert np.array_equal(default, explicit)


@pytest.mark.parametrize("causal", [False, True])
def test_kernelized_error_bound_is_the_docstring_formula(causal):
    n, d, dv = 5, 2, 2
    Q, K = RNG.normal(size=(2, n, d))
    V = RNG.normal(size=(n, dv))
    k = Polynomial(2, c=1.0)
    G = k(Q, K)
    EG = k.error_bound(Q, K)
    if causal:
        G, EG = np.tril(G), np.tril(EG)
    W = np.hstack([V, np.ones((n, 1))])
    absH = np.abs(G) @ np.abs(W)
    EGW = EG @ np.abs(W)
    g64 = gamma(n + 2)
    E = (EGW + gamma(n + 1) * absH) * (1 + g64) + n * ETA * (1 + np.abs(W).max())
    expected = _quotient(absH * (1 + g64) + EGW * (1 + g64), E, (G @ W)[:, -1])
    got = A.kernelized_error_bound(Q, K, V, k, causal=causal)
    assert np.allclose(got, expected, rtol=1e3 * U, atol=0)
    # the bound holds: kernelized against an exact evaluation of the Gram block
    exact = np.array(k.gram_mp(Q, K, dps=40).tolist(), dtype=float)
    if causal:
        exact = np.tril(exact)
    ref = (exact @ V) / exact.sum(axis=1, keepdims=True)
    assert np.all(np.abs(A.kernelized(Q, K, V, k, causal=causal) - ref) <= got)


def test_kernelized_error_bound_lower_precision_and_extra_ops_grow_it():
    Q, K = RNG.normal(size=(2, 5, 2))
    V = RNG.normal(size=(5, 1))
    k = Exponential(0.5)
    base = A.kernelized_error_bound(Q, K, V, k)
    assert np.all(A.kernelized_error_bound(Q, K, V, k, extra_ops=4) > base)
    b32 = A.kernelized_error_bound(Q, K, V, k, dtype=np.float32)
    ratio = unit_roundoff(np.float32) / U
    assert np.all(b32 > 0.5 * ratio * base)


def test_bounds_cover_float32_runs():
    """A float32 run is within the float32 bound of the float64 reference (C14)."""
    pq = RNG.random((2, 12, 4)) + 0.1
    pk = RNG.random((2, 12, 4)) + 0.1
    V = RNG.normal(size=(2, 12, 3))
    ref = A.parallel(pq, pk, V, causal=True)
    f32 = [x.astype(np.float32) for x in (pq, pk, V)]
    bound = A.linear_error_bound(pq, pk, V, causal=True, dtype=np.float32, extra_ops=2)
    for out in (A.parallel(*f32, causal=True), A.recurrent(*f32), A.chunked(*f32, chunk_size=5)):
        assert out.dtype == np.float32
        assert np.all(np.abs(out - ref) <= bound)
    Q, K = RNG.normal(size=(2, 12, 4))
    sref = A.softmax(Q, K, V[0])
    s32 = A.softmax(Q.astype(np.float32), K.astype(np.float32), V[0].astype(np.float32))
    sb = A.softmax_error_bound(Q, K, V[0], dtype=np.float32, extra_ops=2)
    assert np.all(np.abs(s32 - sref) <= sb)


def test_linear_kernel_normalisers_reported_by_kernelized():
    Q = np.array([[1.0], [-1.0]])
    res = A.kernelized(Q, Q, np.ones((2, 1)), Linear(), on_bad_normalizer="report")
    # normalisers: q_i (k_1 + k_2) = 0 for both rows
    assert res.bad_positions.tolist() == [[0], [1]]
    assert np.array_equal(res.normalizer, [0.0, 0.0])


# ---------------------------------------------------------------------------
# Clean failures carry the form's name and leak no NumPy warning
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["parallel", "parallel-causal", "recurrent", "chunked", "step"])
def test_overflow_raises_numerical_failure_without_runtime_warnings(form):
    import warnings

    big = np.full((3, 2), 1e200)
    V = np.ones((3, 1))
    calls = {
        "parallel": lambda: A.parallel(big, big, V),
        "parallel-causal": lambda: A.parallel(big, big, V, causal=True),
        "recurrent": lambda: A.recurrent(big, big, V),
        "chunked": lambda: A.chunked(big, big, V, chunk_size=2),
        "step": lambda: A.step(A.init(2, 1), big[0], big[0], V[0]),
    }
    name = form.split("-")[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an overflow warning escaping would raise here
        with pytest.raises(
            NumericalFailure,
            match=rf"^`{name}` attention overflowed: a numerator "
            r"or normaliser is not finite \(float64\); scale the features or "
            r"inputs down$",
        ):
            calls[form]()


def test_softmax_and_kernelized_failures_without_runtime_warnings():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(
            NumericalFailure,
            match=r"^`softmax` logits overflowed: scale \* q \. k "
            r"is beyond the floating-point range \(float64\); scale the inputs down$",
        ):
            A.softmax(np.full((2, 2), 1e200), np.full((2, 2), 1e200), np.ones((2, 1)))
        with pytest.raises(NumericalFailure, match=r"^`softmax` attention overflowed"):
            A.softmax(np.ones((2, 2)), np.ones((2, 2)), np.full((2, 1), 1e308))
        with pytest.raises(NumericalFailure, match=r"^`kernelized` attention overflowed"):
            A.kernelized(np.ones((2, 2)), np.ones((2, 2)), np.full((2, 1), 1e308), Exponential())


@pytest.mark.parametrize("form", ["kernelized", "step", "recurrent", "chunked", "parallel"])
def test_bad_normalizer_messages_name_the_form(form):
    phi = np.array([[1.0], [-1.0]])
    V = np.ones((2, 1))
    calls = {
        "kernelized": lambda: A.kernelized(phi, phi, V, Linear()),
        "step": lambda: A.step(A.init(1, 1), [-1.0], [1.0], [1.0]),
        "recurrent": lambda: A.recurrent(phi, phi, V),
        "chunked": lambda: A.chunked(phi, phi, V),
        "parallel": lambda: A.parallel(phi, phi, V),
    }
    with pytest.raises(BadNormalizer, match=rf"normalisers are <= 0 in `{form}` \(first at"):
        calls[form]()


def test_recurrent_state_carries_the_batch_shape():
    pq = RNG.random((3, 2, 5, 4)) + 0.1
    pk = RNG.random((3, 2, 5, 4)) + 0.1
    V = RNG.normal(size=(3, 2, 5, 2))
    out, state = A.recurrent(pq, pk, V, return_state=True)
    assert state.S.shape == (3, 2, 4, 2) and state.z.shape == (3, 2, 4)
    assert np.allclose(state.S, np.swapaxes(pk, -1, -2) @ V)
    assert out.dtype == np.float64
    out32 = A.recurrent(*(x.astype(np.float32) for x in (pq, pk, V)))
    assert out32.dtype == np.float32
    # one step with a batched state: same as the first token of the sequence
    s, y = A.step(A.init(4, 2, batch_shape=(3, 2)), pq[..., 0, :], pk[..., 0, :], V[..., 0, :])
    assert np.allclose(y, out[..., 0, :])
    assert s.S.shape == (3, 2, 4, 2)


# ---------------------------------------------------------------------------
# step: every argument takes part in the batch check and the dtype choice
# ---------------------------------------------------------------------------

_D, _DV = 4, 2
_GOOD = {
    "S": np.zeros((3, _D, _DV)),
    "z": np.zeros((3, _D)),
    "phi_q": np.ones((3, _D)),
    "phi_k": np.ones((3, _D)),
    "v": np.ones((3, _DV)),
}


@pytest.mark.parametrize("odd", ["S", "z", "phi_q", "phi_k", "v"])
def test_step_batch_mismatch_in_any_one_argument_is_refused(odd):
    args = dict(_GOOD)
    bad = args[odd]
    args[odd] = np.concatenate([bad, bad[:1]])[None].repeat(2, axis=0)  # batch (2, 4)
    state = A.State(args["S"], args["z"])
    shapes = (
        args["S"].shape[:-2],
        args["phi_q"].shape[:-1],
        args["phi_k"].shape[:-1],
        args["v"].shape[:-1],
    )
    message = (
        r"^the leading \(batch/head\) dimensions of `state`, `phi_q`, `phi_k` and `v` do not "
        r"broadcast: " + re.escape(", ".join(str(s) for s in shapes)) + "$"
    )
    with pytest.raises(InvalidArgument, match=message):
        A.step(state, args["phi_q"], args["phi_k"], args["v"])


@pytest.mark.parametrize("wide", ["S", "z", "phi_q", "phi_k", "v", None])
def test_step_result_dtype_is_float64_if_any_argument_is(wide):
    args = {k: v.astype(np.float32) for k, v in _GOOD.items()}
    if wide is not None:
        args[wide] = args[wide].astype(np.float64)
    new, y = A.step(A.State(args["S"], args["z"]), args["phi_q"], args["phi_k"], args["v"])
    expected = np.float32 if wide is None else np.float64
    assert y.dtype == new.S.dtype == new.z.dtype == expected


def test_recurrent_float32_equals_float32_steps_bitwise():
    pq = (RNG.random((9, 3)) + 0.1).astype(np.float32)
    pk = (RNG.random((9, 3)) + 0.1).astype(np.float32)
    V = RNG.normal(size=(9, 2)).astype(np.float32)
    state = A.init(3, 2, dtype=np.float32)
    ys = []
    for t in range(9):
        state, y = A.step(state, pq[t], pk[t], V[t])
        ys.append(y)
    out, final = A.recurrent(pq, pk, V, return_state=True)
    assert out.dtype == np.float32 and final.S.dtype == np.float32
    assert np.array_equal(out, np.array(ys))
    assert np.array_equal(final.S, state.S) and np.array_equal(final.z, state.z)


def test_chunked_default_chunk_is_64():
    pq = RNG.random((200, 3)) + 0.1
    pk = RNG.random((200, 3)) + 0.1
    V = RNG.normal(size=(200, 2))
    assert np.array_equal(A.chunked(pq, pk, V), A.chunked(pq, pk, V, chunk_size=64))
    assert A.cost_model("chunked", 200, 3, 3, 2).chunk_size == 64


def test_blas_controller_is_created_once_and_sees_the_blas(monkeypatch):
    threadpoolctl = pytest.importorskip("threadpoolctl")
    has_blas = any(info["user_api"] == "blas" for info in threadpoolctl.threadpool_info())
    monkeypatch.setattr(_att, "_CONTROLLER", [])
    first = _att._blas_controller()
    assert len(_att._CONTROLLER) == 1
    assert _att._blas_controller() is first
    if has_blas:
        assert first is not None and first.lib_controllers
        assert all(lib.user_api == "blas" for lib in first.lib_controllers)
    else:
        assert first is None


# ---------------------------------------------------------------------------
# Error bounds: defaults, batches, the underflow term
# ---------------------------------------------------------------------------


def _batched_inputs():
    Q, K = RNG.normal(size=(2, 3, 2, 6, 4))
    V = RNG.normal(size=(3, 2, 6, 2))
    return Q, K, np.abs(Q) + 0.1, np.abs(K) + 0.1, V


def test_error_bounds_defaults_are_the_documented_ones():
    Q, K, pq, pk, V = (x[0, 0] for x in _batched_inputs())
    k = Exponential(0.5)
    assert np.array_equal(
        A.softmax_error_bound(Q, K, V),
        A.softmax_error_bound(Q, K, V, causal=False, scale=0.5, dtype=np.float64, extra_ops=0),
    )
    assert np.array_equal(
        A.linear_error_bound(pq, pk, V),
        A.linear_error_bound(pq, pk, V, causal=False, dtype=np.float64, extra_ops=0),
    )
    assert np.array_equal(
        A.kernelized_error_bound(Q, K, V, k),
        A.kernelized_error_bound(Q, K, V, k, causal=False, dtype=np.float64, extra_ops=0),
    )


@pytest.mark.parametrize("causal", [False, True])
def test_error_bounds_of_a_batch_are_the_bounds_of_its_members(causal):
    Q, K, pq, pk, V = _batched_inputs()
    k = Exponential(0.5)
    soft = A.softmax_error_bound(Q, K, V, causal=causal)
    lin = A.linear_error_bound(pq, pk, V, causal=causal)
    ker = A.kernelized_error_bound(Q, K, V, k, causal=causal)
    assert soft.shape == lin.shape == ker.shape == V.shape
    for b in np.ndindex(3, 2):
        assert np.array_equal(soft[b], A.softmax_error_bound(Q[b], K[b], V[b], causal=causal))
        assert np.allclose(
            lin[b], A.linear_error_bound(pq[b], pk[b], V[b], causal=causal), rtol=8 * U, atol=0
        )
        assert np.allclose(
            ker[b], A.kernelized_error_bound(Q[b], K[b], V[b], k, causal=causal), rtol=8 * U, atol=0
        )


def test_softmax_error_bound_with_zero_values_is_the_underflow_term():
    """V = 0: the output is exactly 0; only the gradual-underflow term remains."""
    Q, K = RNG.normal(size=(2, 5, 3))
    for dtype in (np.float64, np.float32):
        eta = float(np.finfo(dtype).smallest_subnormal)
        E = A.softmax_error_bound(Q, K, np.zeros((5, 2)), dtype=dtype)
        assert np.all(E == (3 * 5 + 2) * eta * (1 + gamma(6)))
        # 1 + vmax: with |V| = 1 the term doubles next to the weight term
        V1 = np.ones((5, 1))
        E1 = A.softmax_error_bound(Q, K, V1, dtype=dtype)
        assert np.all(E1 > 2 * (3 * 5 + 2) * eta)


def test_softmax_value_overflow_message():
    with pytest.raises(
        NumericalFailure,
        match=r"^`softmax` attention overflowed: a weighted sum "
        r"of values is beyond the floating-point range \(float64, max \|V\| = "
        r"1e\+308\); scale the values down$",
    ):
        A.softmax(np.ones((2, 2)), np.ones((2, 2)), np.full((2, 1), 1e308))
