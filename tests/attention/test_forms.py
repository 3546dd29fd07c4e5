"""Unit tests of the attention forms (claims C1, C10, C11, C12, C14).

Reference computations here are independent of the code under test: a
brute-force Gram matrix ``phi(Q) phi(K)^T`` (masked with ``np.tril`` when
causal) divided row by row, and mpmath at 50 digits on the float inputs taken
as exact binary numbers for the error-model checks.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

import kernelcheck
from kernelcheck import attention as att
from kernelcheck._src.attention import forms as _att
from kernelcheck._src.core.rounding import gamma
from kernelcheck.errors import BadNormalizer, InvalidArgument, NumericalFailure
from kernelcheck.kernels import Exponential, Linear, Polynomial, exp


def _rng(seed=0):
    return np.random.default_rng(seed)


def _brute_linear(pq, pk, V, causal):
    """Direct formula: G = phi_q phi_k^T, masked, then (G V) / (G 1)."""
    G = np.einsum("...id,...jd->...ij", pq, pk)
    if causal:
        G = np.tril(G)
    return (G @ V) / G.sum(axis=-1)[..., None], G.sum(axis=-1)


def _mp_linear(pq, pk, V, causal):
    """The exact output (to 50 digits) of linear attention on float inputs."""
    n, dv = V.shape
    out = np.empty((n, dv))
    with mpmath.workdps(50):
        for i in range(n):
            js = range(i + 1) if causal else range(n)
            w = [
                mpmath.fsum(
                    mpmath.mpf(float(a)) * mpmath.mpf(float(b))
                    for a, b in zip(pq[i], pk[j], strict=True)
                )
                for j in js
            ]
            den = mpmath.fsum(w)
            for m in range(dv):
                num = mpmath.fsum(
                    wj * mpmath.mpf(float(V[j, m])) for wj, j in zip(w, js, strict=True)
                )
                out[i, m] = float(num / den)
    return out


def _mp_softmax(Q, K, V, causal, scale):
    """Exact softmax attention (50 digits) with the exact scale, inputs as exact binaries."""
    n, dv = V.shape
    out = np.empty((n, dv))
    with mpmath.workdps(50):
        sc = mpmath.mpf(1) / mpmath.sqrt(Q.shape[1]) if scale is None else mpmath.mpf(scale)
        for i in range(n):
            js = range(i + 1) if causal else range(n)
            s = [
                sc
                * mpmath.fsum(
                    mpmath.mpf(float(a)) * mpmath.mpf(float(b))
                    for a, b in zip(Q[i], K[j], strict=True)
                )
                for j in js
            ]
            m = max(s)
            w = [mpmath.exp(x - m) for x in s]
            den = mpmath.fsum(w)
            for c in range(dv):
                out[i, c] = float(
                    mpmath.fsum(
                        wj * mpmath.mpf(float(V[j, c])) for wj, j in zip(w, js, strict=True)
                    )
                    / den
                )
    return out


# ---------------------------------------------------------------------------
# Softmax
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True])
def test_softmax_matches_direct_formula(causal):
    rng = _rng(1)
    Q, K, V = rng.normal(size=(3, 11, 5))
    S = Q @ K.T / math.sqrt(5)
    if causal:
        S = np.where(np.tril(np.ones((11, 11), bool)), S, -np.inf)
    W = np.exp(S)  # logits are small here: the unshifted formula is exact enough
    ref = (W / W.sum(axis=1, keepdims=True)) @ V
    out = att.softmax(Q, K, V, causal=causal)
    assert np.abs(out - ref).max() <= 2 * att.softmax_error_bound(Q, K, V, causal=causal).max()


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("logit", [1.0, 300.0, 3000.0])
def test_softmax_within_error_bound_of_exact(causal, logit):
    """The a-priori bound holds against mpmath, also where naive exp overflows."""
    rng = _rng(2)
    n, d = 6, 3
    Q = rng.normal(size=(n, d))
    K = rng.normal(size=(n, d))
    Q *= math.sqrt(logit) / np.linalg.norm(Q, axis=1, keepdims=True)
    K *= math.sqrt(logit) / np.linalg.norm(K, axis=1, keepdims=True)
    V = rng.normal(size=(n, 2))
    out = att.softmax(Q, K, V, causal=causal, scale=1.0)
    exact = _mp_softmax(Q, K, V, causal, 1.0)
    bound = att.softmax_error_bound(Q, K, V, causal=causal, scale=1.0)
    assert np.isfinite(out).all()
    assert (np.abs(out - exact) <= bound).all()


def test_softmax_causal_first_row_is_first_value():
    rng = _rng(3)
    Q, K, V = rng.normal(size=(3, 4, 2))
    assert np.array_equal(att.softmax(Q, K, V, causal=True)[0], V[0])


def test_softmax_blocks_agree_with_one_block(monkeypatch):
    """Row blocking changes nothing: compare a tiny block budget with the default."""
    rng = _rng(4)
    Q, K, V = rng.normal(size=(3, 2, 13, 4))
    whole = att.softmax(Q, K, V, causal=True)
    monkeypatch.setattr(_att, "_BLOCK_ELEMENTS", 30)
    blocked = att.softmax(Q, K, V, causal=True)
    assert np.abs(whole - blocked).max() <= 2 * att.softmax_error_bound(Q, K, V, causal=True).max()


def test_softmax_equals_kernelized_exponential():
    """C10: exp(q.k / sqrt d) is the kernel Exponential(1/sqrt(d))."""
    rng = _rng(5)
    Q, K, V = rng.normal(size=(3, 2, 9, 4))
    for causal in (False, True):
        a = att.softmax(Q, K, V, causal=causal)
        k = Exponential(0.5)
        b = att.kernelized(Q, K, V, k, causal=causal)
        tol = att.softmax_error_bound(Q, K, V, causal=causal) + att.kernelized_error_bound(
            Q, K, V, k, causal=causal
        )
        assert (np.abs(a - b) <= tol).all()


def test_softmax_float32_stays_float32():
    rng = _rng(6)
    Q, K, V = rng.normal(size=(3, 5, 3)).astype(np.float32)
    out = att.softmax(Q, K, V)
    assert out.dtype == np.float32
    ref = att.softmax(Q.astype(np.float64), K.astype(np.float64), V.astype(np.float64))
    assert (np.abs(out - ref) <= att.softmax_error_bound(Q, K, V) + 1e-300).all()


def test_mixed_precision_is_float64():
    rng = _rng(7)
    Q, K, V = rng.normal(size=(3, 5, 3))
    assert att.softmax(Q.astype(np.float32), K, V).dtype == np.float64


def test_softmax_overflowing_logits_raise():
    Q = np.full((2, 2), 1e200)
    with pytest.raises(NumericalFailure, match="overflow"):
        att.softmax(Q, Q, np.ones((2, 1)), scale=1.0)


# ---------------------------------------------------------------------------
# Kernelized and linear forms against the brute-force formula
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("batch", [(), (2,), (2, 3)])
def test_parallel_matches_brute_force(causal, batch):
    rng = _rng(8)
    pq, pk = rng.random((2,) + batch + (10, 6))
    V = rng.normal(size=batch + (10, 3))
    ref, _ = _brute_linear(pq, pk, V, causal)
    tol = 2 * att.linear_error_bound(pq, pk, V, causal=causal)
    assert (np.abs(att.parallel(pq, pk, V, causal=causal) - ref) <= tol).all()


@pytest.mark.parametrize("chunk_size", [1, 2, 3, 7, 10, 11, 64])
def test_chunked_matches_brute_force(chunk_size):
    rng = _rng(9)
    pq, pk = rng.random((2, 2, 10, 5))
    V = rng.normal(size=(2, 10, 4))
    ref, _ = _brute_linear(pq, pk, V, True)
    tol = 2 * att.linear_error_bound(pq, pk, V, causal=True)
    assert (np.abs(att.chunked(pq, pk, V, chunk_size=chunk_size) - ref) <= tol).all()


def test_chunked_groups_carry_state(monkeypatch):
    """With a tiny block budget every chunk is its own group: same result."""
    rng = _rng(10)
    pq, pk = rng.random((2, 23, 4))
    V = rng.normal(size=(23, 2))
    ref = att.chunked(pq, pk, V, chunk_size=4)
    monkeypatch.setattr(_att, "_BLOCK_ELEMENTS", 1)
    small = att.chunked(pq, pk, V, chunk_size=4)
    prefix = att.parallel(pq, pk, V, causal=True)  # also one token per block now
    tol = 2 * att.linear_error_bound(pq, pk, V, causal=True)
    assert (np.abs(small - ref) <= tol).all() and (np.abs(prefix - ref) <= tol).all()


def test_chunked_worker_threads_agree_with_inline(monkeypatch):
    """The threaded split of chunks (forced on for small input) changes nothing beyond rounding."""
    rng = _rng(19)
    pq, pk = rng.random((2, 2, 50, 6))
    V = rng.normal(size=(2, 50, 3))
    inline = att.chunked(pq, pk, V, chunk_size=4)
    monkeypatch.setattr(_att, "_PARALLEL_WORK", 0)
    threaded = att.chunked(pq, pk, V, chunk_size=4)
    tol = 2 * att.linear_error_bound(pq, pk, V, causal=True)
    assert (np.abs(threaded - inline) <= tol).all()
    ref, _ = _brute_linear(pq, pk, V, True)
    assert (np.abs(threaded - ref) <= tol).all()


def test_kernelized_matches_feature_form():
    rng = _rng(11)
    Q, K, V = rng.normal(size=(3, 8, 3)) * 0.5
    k = Polynomial(2, c=1.0)
    phi = k.features()
    for causal in (False, True):
        a = att.kernelized(Q, K, V, k, causal=causal)
        ref, _ = _brute_linear(phi(Q), phi(K), V, causal)
        tol = att.kernelized_error_bound(Q, K, V, k, causal=causal) + att.linear_error_bound(
            phi(Q), phi(K), V, causal=causal, extra_ops=2 * phi.ops
        )
        assert (np.abs(a - ref) <= tol).all()


def test_kernelized_rejects_wrong_gram_shape():
    with pytest.raises(InvalidArgument, match="Gram block"):
        att.kernelized(
            np.ones((3, 2)), np.ones((3, 2)), np.ones((3, 1)), lambda X, Y: np.ones((2, 2))
        )


@pytest.mark.parametrize("causal", [False, True])
def test_linear_error_bound_holds_against_exact(causal):
    """Each linear form is within linear_error_bound of the mpmath value."""
    rng = _rng(12)
    pq = rng.random((9, 4)) * np.array([1.0, 1e3, 1e-3, 1.0])
    pk = rng.random((9, 4))
    V = rng.normal(size=(9, 3)) + 100.0  # offset: cancellation in nothing, large |V|
    exact = _mp_linear(pq, pk, V, causal)
    bound = att.linear_error_bound(pq, pk, V, causal=causal)
    outs = [att.parallel(pq, pk, V, causal=causal)]
    if causal:
        outs += [att.recurrent(pq, pk, V), att.chunked(pq, pk, V, chunk_size=4)]
    for out in outs:
        assert (np.abs(out - exact) <= bound).all()
    # The bound is a rounding bound, not a blanket: within a modest multiple of
    # gamma_k times the output's size (k = 2 n + 2 D + 4).
    k = 2 * 9 + 2 * 4 + 4
    assert bound.max() <= 100 * k * np.finfo(float).eps * np.abs(V).max()


def test_error_bound_is_inf_where_normaliser_sign_uncertain():
    pq = np.array([[1.0, 1.0]])
    pk = np.array([[1.0, -1.0]])  # phi_q . phi_k = 0 exactly
    bound = att.linear_error_bound(pq, pk, np.ones((1, 1)))
    assert np.isinf(bound).all()


# ---------------------------------------------------------------------------
# Recurrence
# ---------------------------------------------------------------------------


def test_step_is_pure_and_matches_recurrent():
    rng = _rng(13)
    pq, pk = rng.random((2, 7, 3))
    V = rng.normal(size=(7, 2))
    state = att.init(3, 2)
    before = (state.S.copy(), state.z.copy())
    ys = []
    s = state
    for t in range(7):
        s, y = att.step(s, pq[t], pk[t], V[t])
        ys.append(y)
    assert np.array_equal(state.S, before[0]) and np.array_equal(state.z, before[1])
    out, final = att.recurrent(pq, pk, V, return_state=True)
    assert np.array_equal(np.array(ys), out)  # the same operations in the same order
    assert np.array_equal(final.S, s.S) and np.array_equal(final.z, s.z)
    # and the state is the running sums (C11): S = phi_k^T V, z = sum phi_k
    assert (
        np.abs(final.S - pk.T @ V).max() <= 2 * 7 * np.finfo(float).eps * (pk.T @ np.abs(V)).max()
    )


def test_step_broadcasts_over_batch():
    rng = _rng(14)
    pq, pk = rng.random((2, 4, 5, 3))
    V = rng.normal(size=(4, 5, 2))
    s = att.init(3, 2)  # no batch shape: broadcasts
    ys = []
    for t in range(5):
        s, y = att.step(s, pq[:, t], pk[:, t], V[:, t])
        ys.append(y)
    assert s.S.shape == (4, 3, 2)
    ref = att.recurrent(pq, pk, V)
    assert np.array_equal(np.stack(ys, axis=1), ref)


def test_state_size_does_not_depend_on_n():
    """C11, deterministic: the final state has D (d_v + 1) numbers for every n."""
    rng = _rng(15)
    sizes = set()
    for n in (1, 5, 40):
        pq, pk = rng.random((2, n, 6))
        _, state = att.recurrent(pq, pk, rng.normal(size=(n, 3)), return_state=True)
        sizes.add((state.S.shape, state.z.shape, state.size, state.nbytes))
    assert sizes == {((6, 3), (6,), 6 * 4, 6 * 4 * 8)}


# ---------------------------------------------------------------------------
# Bad normalisers (C12): raised or reported, never patched
# ---------------------------------------------------------------------------


def _signed_features():
    rng = _rng(16)
    pq = rng.normal(size=(12, 3))
    pk = rng.normal(size=(12, 3))
    return pq, pk, rng.normal(size=(12, 2))


@pytest.mark.parametrize(
    "form",
    [
        lambda pq, pk, V, **kw: att.parallel(pq, pk, V, **kw),
        lambda pq, pk, V, **kw: att.parallel(pq, pk, V, causal=True, **kw),
        lambda pq, pk, V, **kw: att.recurrent(pq, pk, V, **kw),
        lambda pq, pk, V, **kw: att.chunked(pq, pk, V, chunk_size=5, **kw),
    ],
    ids=["parallel", "parallel-causal", "recurrent", "chunked"],
)
def test_bad_normalisers_raise_then_report(form):
    pq, pk, V = _signed_features()
    with pytest.raises(BadNormalizer) as info:
        form(pq, pk, V)
    res = form(pq, pk, V, on_bad_normalizer="report")
    assert isinstance(res, att.AttentionOutput)
    assert not res.ok
    assert np.array_equal(info.value.positions, res.bad_positions)
    assert (res.bad_values <= 0).all()
    # positions are exactly the non-positive normalisers
    assert np.array_equal(np.argwhere(res.normalizer <= 0), res.bad_positions)
    assert "<= 0" in str(res)


def test_report_mode_output_is_raw_quotient():
    """out * normaliser reproduces phi_q phi_k^T V: nothing was added to the normaliser."""
    pq, pk, V = _signed_features()
    res = att.parallel(pq, pk, V, on_bad_normalizer="report")
    absG = np.abs(pq) @ np.abs(pk).T
    g = gamma(2 * 12 + 2 * 3 + 4)
    assert (np.abs(res.normalizer - (pq @ pk.T).sum(axis=1)) <= 2 * g * absG.sum(axis=1)).all()
    num = res.out * res.normalizer[:, None]
    assert (np.abs(num - (pq @ pk.T) @ V) <= 2 * g * (absG @ np.abs(V))).all()


def test_report_mode_with_good_normalisers():
    rng = _rng(17)
    pq, pk = rng.random((2, 4, 3))
    res = att.parallel(pq, pk, np.ones((4, 1)), on_bad_normalizer="report")
    assert res.ok and res.bad_positions.shape == (0, 1)
    assert "all 4 normalisers > 0" in str(res)
    assert res.to_dict()["bad_positions"] == []


def test_kernelized_linear_kernel_bad_normaliser():
    Q = np.array([[1.0], [-1.0]])
    with pytest.raises(BadNormalizer, match="C12"):
        att.kernelized(Q, Q, np.ones((2, 1)), Linear())


def test_overflowing_features_raise():
    pq = np.full((3, 2), 1e200)
    with pytest.raises(NumericalFailure):
        att.parallel(pq, pq, np.ones((3, 1)))


# ---------------------------------------------------------------------------
# Cost model (C2, C3, C11)
# ---------------------------------------------------------------------------


def test_cost_model_linear_forms_scale_linearly():
    for form in ("parallel", "recurrent", "chunked"):
        a = att.cost_model(form, 1024, 64, 256, 64)
        b = att.cost_model(form, 2048, 64, 256, 64)
        assert a.state_size == b.state_size == 256 * 65
        assert b.flops == 2 * a.flops
        assert a.flops_per_token() == b.flops_per_token()


def test_cost_model_exact_forms_scale_quadratically():
    a = att.cost_model("softmax", 1000, 64, 256, 64)
    b = att.cost_model("softmax", 2000, 64, 256, 64)
    assert 3.9 < b.flops / a.flops <= 4.0
    assert b.state_size == 2 * a.state_size
    causal = att.cost_model("softmax", 1000, 64, 256, 64, causal=True)
    assert causal.flops < a.flops


def test_cost_model_chunked_counts_chunks():
    """chunk_size >= n: one quadratic chunk; chunk_size = 1: pure state updates."""
    full = att.cost_model("chunked", 10, 4, 8, 3, chunk_size=10)
    bigger = att.cost_model("chunked", 10, 4, 8, 3, chunk_size=99)
    assert full.flops == bigger.flops
    one = att.cost_model("chunked", 10, 4, 8, 3, chunk_size=1)
    rec = att.cost_model("recurrent", 10, 4, 8, 3)
    assert one.flops > rec.flops  # the chunked form also counts its per-chunk additions
    assert "chunked (causal), n=10" in str(one)
    assert one.to_dict()["flops"] == one.flops


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------

_Q = np.ones((4, 3))
_V = np.ones((4, 2))
_NAN = np.where(np.eye(4, 3) > 0, np.nan, 1.0)
_INF = np.where(np.eye(4, 3) > 0, np.inf, 1.0)

BAD_CALLS = [
    ("softmax n mismatch Q/K", lambda: att.softmax(_Q, np.ones((5, 3)), _V), "number of tokens"),
    ("softmax n mismatch K/V", lambda: att.softmax(_Q, _Q, np.ones((5, 2))), "number of tokens"),
    ("softmax d mismatch", lambda: att.softmax(_Q, np.ones((4, 2)), _V), "last dimension"),
    (
        "softmax batch mismatch",
        lambda: att.softmax(np.ones((2, 4, 3)), np.ones((3, 4, 3)), np.ones((2, 4, 2))),
        "leading",
    ),
    ("softmax rank 1", lambda: att.softmax(np.ones(3), _Q, _V), "at least 2 dimensions"),
    ("softmax NaN", lambda: att.softmax(_NAN, _Q, _V), "`Q` must be finite"),
    (
        "softmax Inf in V",
        lambda: att.softmax(_Q, _Q, np.full((4, 2), np.inf)),
        "`V` must be finite",
    ),
    (
        "softmax empty",
        lambda: att.softmax(np.ones((0, 3)), np.ones((0, 3)), np.ones((0, 2))),
        "must not be empty",
    ),
    ("softmax complex", lambda: att.softmax(_Q + 0j, _Q, _V), "must be real"),
    ("softmax scale", lambda: att.softmax(_Q, _Q, _V, scale=-1.0), "`scale`"),
    ("softmax scale nan", lambda: att.softmax(_Q, _Q, _V, scale=float("nan")), "`scale`"),
    ("softmax causal", lambda: att.softmax(_Q, _Q, _V, causal="yes"), "`causal`"),
    ("kernelized kernel", lambda: att.kernelized(_Q, _Q, _V, 3), "`kernel` must be callable"),
    (
        "kernelized action",
        lambda: att.kernelized(_Q, _Q, _V, Linear(), on_bad_normalizer="eps"),
        "`on_bad_normalizer`",
    ),
    ("parallel D mismatch", lambda: att.parallel(_Q, np.ones((4, 2)), _V), "last dimension D"),
    ("parallel n mismatch", lambda: att.parallel(_Q, _Q, np.ones((3, 2))), "number of tokens"),
    ("parallel Inf", lambda: att.parallel(_INF, _Q, _V), "`phi_q` must be finite"),
    ("parallel rank", lambda: att.parallel(_Q, _Q, np.ones(4)), "`V` must have shape"),
    (
        "parallel action",
        lambda: att.parallel(_Q, _Q, _V, on_bad_normalizer=None),
        "`on_bad_normalizer`",
    ),
    ("recurrent NaN", lambda: att.recurrent(_Q, _NAN, _V), "`phi_k` must be finite"),
    ("recurrent n mismatch", lambda: att.recurrent(_Q, _Q, np.ones((5, 2))), "number of tokens"),
    (
        "chunked chunk_size 0",
        lambda: att.chunked(_Q, _Q, _V, chunk_size=0),
        "`chunk_size` must be >= 1",
    ),
    (
        "chunked chunk_size -3",
        lambda: att.chunked(_Q, _Q, _V, chunk_size=-3),
        "`chunk_size` must be >= 1",
    ),
    (
        "chunked chunk_size float",
        lambda: att.chunked(_Q, _Q, _V, chunk_size=2.0),
        "`chunk_size` must be an integer",
    ),
    (
        "chunked chunk_size bool",
        lambda: att.chunked(_Q, _Q, _V, chunk_size=True),
        "`chunk_size` must be an integer",
    ),
    ("chunked d mismatch", lambda: att.chunked(_Q, np.ones((4, 5)), _V), "last dimension D"),
    ("init D", lambda: att.init(0, 2), "`D` must be >= 1"),
    ("init dtype", lambda: att.init(2, 2, dtype=np.int64), "`dtype`"),
    ("init batch", lambda: att.init(2, 2, batch_shape=[3]), "`batch_shape`"),
    (
        "step state",
        lambda: att.step((np.zeros((2, 2)), np.zeros(2)), [1.0, 1.0], [1.0, 1.0], [1.0, 1.0]),
        "`state` must be a State",
    ),
    (
        "step phi_q dim",
        lambda: att.step(att.init(2, 2), [1.0], [1.0, 1.0], [1.0, 1.0]),
        "`phi_q` must have last dimension D = 2",
    ),
    (
        "step v dim",
        lambda: att.step(att.init(2, 2), [1.0, 1.0], [1.0, 1.0], [1.0]),
        "`v` must have last dimension d_v = 2",
    ),
    (
        "step NaN",
        lambda: att.step(att.init(2, 1), [np.nan, 1.0], [1.0, 1.0], [1.0]),
        "`phi_q` must be finite",
    ),
    (
        "step batch",
        lambda: att.step(
            att.init(2, 1, batch_shape=(3,)), np.ones((4, 2)), np.ones((4, 2)), np.ones((4, 1))
        ),
        "broadcast",
    ),
    ("bound dtype", lambda: att.linear_error_bound(_Q, _Q, _V, dtype=np.float16), "`dtype`"),
    ("bound extra_ops", lambda: att.softmax_error_bound(_Q, _Q, _V, extra_ops=-1), "`extra_ops`"),
    (
        "bound kernel",
        lambda: att.kernelized_error_bound(_Q, _Q, _V, lambda X, Y: X @ Y.T),
        "error_bound",
    ),
    ("cost form", lambda: att.cost_model("flash", 4, 2, 2, 2), "`form`"),
    ("cost n", lambda: att.cost_model("parallel", 0, 2, 2, 2), "`n` must be >= 1"),
    ("cost causal", lambda: att.cost_model("chunked", 4, 2, 2, 2, causal=False), "`causal`"),
    ("cost chunk", lambda: att.cost_model("chunked", 4, 2, 2, 2, chunk_size=0), "`chunk_size`"),
]


@pytest.mark.parametrize("call, message", [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS])
def test_bad_input_raises(call, message):
    with pytest.raises(InvalidArgument, match=message.replace("(", r"\(").replace(")", r"\)")):
        call()


# ---------------------------------------------------------------------------
# Public surface
# ---------------------------------------------------------------------------


def test_every_public_name_is_documented():
    for name in att.__all__:
        obj = getattr(att, name)
        assert obj.__doc__ and len(obj.__doc__.strip()) > 20, name
    assert kernelcheck.attention is att


def test_facade_exports_the_implementation():
    assert set(att.__all__) <= set(_att.__all__)
    assert att.softmax is _att.softmax


def test_taylor_features_example():
    """The doc example of docs/attention.md: Taylor attention approaches softmax."""
    rng = _rng(18)
    Q, K, V = rng.normal(size=(3, 6, 4)) * 0.4
    s = 4**-0.25
    errs = []
    for M in (1, 2, 4, 8):
        phi = exp(Linear(), order=M).features()
        errs.append(np.abs(att.parallel(phi(Q * s), phi(K * s), V) - att.softmax(Q, K, V)).max())
    assert errs == sorted(errs, reverse=True)
