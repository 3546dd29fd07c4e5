"""Causal softmax masks only the diagonal part of each query block (claims C1, C2).

A causal query block of rows ``i0 .. i0 + r`` forms logits against keys
``0 .. i0 + r``; the future (``j > i``) lies in the block's diagonal square
only.  :func:`~kernelcheck._src.attention.families.softmax.forms.mask_future` masks it by
slices (the keys after a band of rows) and one small triangular mask per
band, never a boolean mask over the block.  These tests pin both halves of
that shortcut: that no future key is seen (bit for bit: the rows before a cut
do not change when every key and value after it does, for block and band
sizes with remainders), and that no block-sized mask is allocated (a
deterministic ``tracemalloc`` bound, not a time).
"""

from __future__ import annotations

import math
import tracemalloc

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelcheck import attention as att
from kernelcheck._src.attention.common import blocking
from kernelcheck._src.attention.common import blocking as _att
from kernelcheck._src.attention.common import vjp as common_vjp
from kernelcheck._src.attention.common.bounds import EXP_ULPS
from kernelcheck._src.attention.families.softmax import vjp as softmax_vjp
from kernelcheck._src.attention.families.softmax.forms import FUTURE_BAND, mask_future
from kernelcheck._src.core.rounding import eta, gamma, unit_roundoff
from kernelcheck.errors import InvalidArgument, NumericalFailure
from kernelcheck.kernels import Exponential
from tests.attention.inputs import (
    G_OUT,
    VJP_BLOCKS,
    K,
    Q,
    V,
    answer_or_clean_error,
    extreme_arrays,
    set_vjp_blocks,
)

RNG = np.random.default_rng(7)
U = unit_roundoff(np.float64)


def _rng(seed=0):
    return np.random.default_rng(seed)


def _direct_causal(Q, K, V):
    """Row by row on the prefix ``j <= i``: no mask at all."""
    out = np.empty((Q.shape[0], V.shape[1]))
    for i in range(Q.shape[0]):
        s = K[: i + 1] @ Q[i] / np.sqrt(Q.shape[1])
        w = np.exp(s - s.max())
        out[i] = (w @ V[: i + 1]) / w.sum()
    return out


@pytest.mark.parametrize("rows", [70, 97, 200])  # blocks of 70 or 97 rows, or one block
def test_causal_softmax_sees_no_future_key(rows, monkeypatch):
    n = 200
    monkeypatch.setattr(blocking, "BLOCK_ELEMENTS", rows * n)
    monkeypatch.setattr(blocking, "CAUSAL_BLOCKS", 1)
    assert blocking.query_block_rows(n, blocking.BLOCK_ELEMENTS // n, True) == rows
    assert rows % FUTURE_BAND and rows > 2 * FUTURE_BAND  # bands with a remainder
    rng = np.random.default_rng(41)
    Q, K, V = rng.standard_normal((3, n, 5))
    out = att.softmax(Q, K, V, causal=True)
    bound = att.softmax_error_bound(Q, K, V, causal=True)
    assert (np.abs(out - _direct_causal(Q, K, V)) <= 2 * bound).all()
    # every cut: inside a band, at a band's edge, at a block's edge, in the last block
    for cut in (1, FUTURE_BAND - 1, FUTURE_BAND, FUTURE_BAND + 1, rows - 1, rows, rows + 5, n - 1):
        K2, V2 = K.copy(), V.copy()
        K2[cut:] = 50 * rng.standard_normal(K2[cut:].shape)  # would dominate every logit
        V2[cut:] = 1e6
        again = att.softmax(Q, K2, V2, causal=True)
        assert np.array_equal(again[:cut], out[:cut]), cut


def test_mask_future_masks_exactly_the_strict_upper_triangle_of_the_square():
    for r, i0 in ((1, 0), (31, 3), (32, 64), (33, 10), (100, 7)):
        s = np.zeros((2, r, i0 + r))  # with a batch dimension
        mask_future(s, i0)
        queries = i0 + np.arange(r)[:, None]
        future = np.arange(i0 + r)[None, :] > queries
        assert np.array_equal(np.isneginf(s[0]), future) and np.array_equal(s[0], s[1])
        assert (s[0][~future] == 0).all()


def _peak(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_causal_softmax_allocates_no_block_sized_mask():
    """Beyond the logits buffer (rows x n), the scaled queries and the output,
    causal softmax allocates only per-row vectors, the band's triangle and
    NumPy's ufunc buffers (``np.getbufsize()`` elements per operand, which the
    broadcast subtraction of the row maxima uses): a boolean mask over a block
    (rows x n bytes, 1/8 of the logits) or a fresh logits array per block
    would exceed the allowance below."""
    n, d = 4096, 4
    rows = blocking.query_block_rows(n, blocking.BLOCK_ELEMENTS // n, True)
    rng = np.random.default_rng(3)
    Q, K, V = rng.standard_normal((3, n, d))
    att.softmax(Q, K, V, causal=True)  # warm: import-time and first-call allocations
    logits = rows * n * 8
    arrays = 2 * n * d * 8  # Qs and the output
    # max and row sums (rows floats each), small objects, two ufunc buffers
    allowance = 64 * rows + 4096 + 2 * 8 * np.getbufsize()
    assert rows * n > allowance  # a block-sized boolean mask (one byte a logit) would not fit
    peak = _peak(lambda: att.softmax(Q, K, V, causal=True))
    assert peak <= logits + arrays + allowance, (peak, logits + arrays)


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


def test_softmax_causal_first_row_is_first_value():
    rng = _rng(3)
    Q, K, V = rng.normal(size=(3, 4, 2))
    assert np.array_equal(att.softmax(Q, K, V, causal=True)[0], V[0])


def test_softmax_blocks_agree_with_one_block(monkeypatch):
    """Row blocking changes nothing: compare a tiny block budget with the default."""
    rng = _rng(4)
    Q, K, V = rng.normal(size=(3, 2, 13, 4))
    whole = att.softmax(Q, K, V, causal=True)
    monkeypatch.setattr(_att, "BLOCK_ELEMENTS", 30)
    blocked = att.softmax(Q, K, V, causal=True)
    assert np.abs(whole - blocked).max() <= 2 * att.softmax_error_bound(Q, K, V, causal=True).max()


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


def test_softmax_value_overflow_message():
    with pytest.raises(
        NumericalFailure,
        match=r"^`softmax` attention overflowed: a weighted sum "
        r"of values is beyond the floating-point range \(float64, max \|V\| = "
        r"1e\+308\); scale the values down$",
    ):
        att.softmax(np.ones((2, 2)), np.ones((2, 2)), np.full((2, 1), 1e308))


def test_softmax_and_kernelized_failures_without_runtime_warnings():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(
            NumericalFailure,
            match=r"^`softmax` logits overflowed: scale \* q \. k "
            r"is beyond the floating-point range \(float64\); scale the inputs down$",
        ):
            att.softmax(np.full((2, 2), 1e200), np.full((2, 2), 1e200), np.ones((2, 1)))
        with pytest.raises(NumericalFailure, match=r"^`softmax` attention overflowed"):
            att.softmax(np.ones((2, 2)), np.ones((2, 2)), np.full((2, 1), 1e308))
        with pytest.raises(NumericalFailure, match=r"^`kernelized` attention overflowed"):
            att.kernelized(np.ones((2, 2)), np.ones((2, 2)), np.full((2, 1), 1e308), Exponential())


# ---------------------------------------------------------------------------
# Bad input the family's own arguments: the scale, the bound's, the VJP's
# ---------------------------------------------------------------------------


#: softmax, its bound and its VJP: (id, call, error, message regex from the start)
SOFTMAX_BAD = [
    (
        "softmax-scale-str",
        lambda: att.softmax(Q, K, V, scale="a"),
        InvalidArgument,
        r"^`scale` must be a real number, got str 'a'",
    ),
    (
        "softmax-scale-bool",
        lambda: att.softmax(Q, K, V, scale=True),
        InvalidArgument,
        r"^`scale` must be a real number, got bool True",
    ),
    (
        "softmax-scale-nan",
        lambda: att.softmax(Q, K, V, scale=float("nan")),
        InvalidArgument,
        r"^`scale` must be finite, got nan",
    ),
    (
        "softmax-scale-neg",
        lambda: att.softmax(Q, K, V, scale=-1.0),
        InvalidArgument,
        r"^`scale` must be > 0, got -1\.0",
    ),
    (
        "softmax-scale-zero",
        lambda: att.softmax(Q, K, V, scale=0),
        InvalidArgument,
        r"^`scale` must be > 0, got 0",
    ),
    (
        "softmax-scale-array",
        lambda: att.softmax(Q, K, V, scale=np.ones(2)),
        InvalidArgument,
        r"^`scale` must be a real number, got array of shape \(2,\)",
    ),
    (
        "seb-scale-inf",
        lambda: att.softmax_error_bound(Q, K, V, scale=float("inf")),
        InvalidArgument,
        r"^`scale` must be finite, got inf",
    ),
    (
        "seb-extra-float",
        lambda: att.softmax_error_bound(Q, K, V, extra_ops=1.5),
        InvalidArgument,
        r"^`extra_ops` must be an integer",
    ),
    (
        "seb-dtype-int",
        lambda: att.softmax_error_bound(Q, K, V, dtype=np.int32),
        InvalidArgument,
        r"^`dtype` must be float64 or float32, got int32",
    ),
    (
        "softmax_vjp-G-shape",
        lambda: att.softmax_vjp(Q, K, V, np.ones((4, 2))),
        InvalidArgument,
        r"^`G` must have the output's shape \(5, 2\), got array of shape \(4, 2\)",
    ),
    (
        "softmax_vjp-G-nan",
        lambda: att.softmax_vjp(Q, K, V, G_OUT * np.nan),
        InvalidArgument,
        r"^`G` must be finite",
    ),
    (
        "softmax_vjp-Q",
        lambda: att.softmax_vjp(Q[:, :2], K, V, G_OUT),
        InvalidArgument,
        r"^`Q` and `K` must have the same last dimension",
    ),
    (
        "softmax_vjp_error_bound-dtype",
        lambda: att.softmax_vjp_error_bound(Q, K, V, G_OUT, dtype="int8"),
        InvalidArgument,
        r"^`dtype` must be float64 or float32",
    ),
    (
        "softmax causal",
        lambda: att.softmax(Q, K, V, causal="yes"),
        InvalidArgument,
        r"^`causal` must be True or False, got str 'yes'",
    ),
    (
        "bound extra_ops",
        lambda: att.softmax_error_bound(Q, K, V, extra_ops=-1),
        InvalidArgument,
        r"^`extra_ops` must be >= 0, got -1",
    ),
]


@pytest.mark.parametrize(
    "call, error, message", [c[1:] for c in SOFTMAX_BAD], ids=[c[0] for c in SOFTMAX_BAD]
)
def test_bad_input_table(call, error, message):
    """Each row raises the expected clean error, its message matched from the start."""
    with pytest.raises(error, match=message):
        call()


# ---------------------------------------------------------------------------
# Extreme values: a correct answer or a clean error
# ---------------------------------------------------------------------------


def test_softmax_is_exact_where_exp_of_the_logits_overflows():
    """Logits of +-1e6: the stable form returns the hard-max answer (reference: one-hot weights)."""
    Qb = np.array([[1000.0], [-1000.0], [500.0]])
    Vb = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    out = att.softmax(Qb, Qb, Vb, scale=1.0)
    # row i attends (almost) only to the key with the largest q_i k_j
    assert np.array_equal(out, Vb[[0, 1, 0]])


def test_softmax_logit_overflow_and_value_overflow_are_clean_errors():
    big = np.full((2, 2), 1e200)
    with pytest.raises(NumericalFailure, match=r"^`softmax` logits overflowed"):
        att.softmax(big, big, np.ones((2, 1)))
    with pytest.raises(NumericalFailure, match=r"^`softmax` attention overflowed: a weighted sum"):
        att.softmax(np.ones((2, 2)), np.ones((2, 2)), np.full((2, 1), 1e308))


def test_nearly_duplicate_tokens_get_equal_weights():
    """Keys differing in the last bit: softmax weights within rounding of 1/n."""
    k = np.array([[1.0], [np.nextafter(1.0, 2.0)], [np.nextafter(1.0, 0.0)]])
    v = np.array([[0.0], [3.0], [6.0]])
    out = att.softmax(k, k, v)
    bound = att.softmax_error_bound(k, k, v)
    # exact weights are within 3 ulp of 1/3 each: the output is within that of 3
    assert np.all(np.abs(out - 3.0) <= bound + 6.0 * 3 * np.finfo(float).eps)


def test_softmax_error_bound_is_finite_or_inf_never_nan():
    big = np.full((2, 2), 1e200)
    bound = att.softmax_error_bound(big, big, np.ones((2, 1)))
    assert not np.isnan(bound).any()
    assert (bound >= 0).all()


@settings(max_examples=40, deadline=None)
@given(extreme_arrays(), st.booleans())
def test_softmax_answers_or_fails_cleanly(t, causal):
    out = answer_or_clean_error(att.softmax, *t, causal=causal)
    if out is not None:
        # a convex combination of values: within the range of V (up to rounding)
        V_ = t[2]
        lo, hi = V_.min(axis=0), V_.max(axis=0)
        slack = att.softmax_error_bound(*t, causal=causal).max(axis=0)
        assert np.all(out >= lo - slack) and np.all(out <= hi + slack)


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
# The bounds hold against the exact output
# ---------------------------------------------------------------------------


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


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("extra, dtype", [(0, None), (2, np.float32)])
def test_softmax_error_bound_is_the_docstring_formula(causal, extra, dtype):
    """The bound is the smaller of the coarse (max |v|) and the fine (output-scaled) formula."""
    n, d, dv = 6, 3, 2
    Q, K = RNG.normal(size=(2, n, d))
    V = RNG.normal(size=(n, dv))
    scale = 0.7
    u = unit_roundoff(dtype or np.float64)
    eta = float(np.finfo(dtype or np.float64).smallest_subnormal)
    got = att.softmax_error_bound(Q, K, V, causal=causal, scale=scale, dtype=dtype, extra_ops=extra)
    kw = dict(causal=causal, scale=scale, dtype=dtype, extra_ops=extra)
    loose = att.softmax_error_bound(Q, K, V, tight=False, **kw)
    for i in range(n):
        J = list(range(i + 1) if causal else range(n))
        kmax = np.abs(K[J]).max(axis=0)
        vmax = np.abs(V[J]).max(axis=0)
        r = scale * np.abs(Q[i]) @ kmax * (1 + gamma(d + 2))
        theta = gamma(d + 2 + extra, dtype or np.float64) * r + 2 * u * r + 5 * u
        gn = gamma(n + extra, dtype or np.float64)
        factor = math.expm1(2 * theta) * (1 + u) + 2 * gn / (1 - gn) + u
        coarse = (factor * vmax + (3 * n + 2) * eta * (1 + vmax)) * (1 + gamma(6))
        # the fine formula, from the weights directly
        r64 = scale * np.abs(Q[i]) @ kmax * (1 + gamma(d + 2))
        theta64 = gamma(d + 2) * r64 + 2 * U * r64 + 5 * U
        gn64 = gamma(n)
        margin = (
            (math.expm1(2 * theta64) * (1 + U) + 2 * gn64 / (1 - gn64) + U) * vmax
            + (3 * n + 2) * 2.0**-1074 * (1 + vmax)
        ) * (1 + gamma(6))
        s_ = scale * K[J] @ Q[i]
        w = np.exp(s_ - s_.max())
        a = w @ V[J] / w.sum()
        A = w @ np.abs(V[J]) / w.sum()
        dev = np.maximum(V[J].max(axis=0) - a, a - V[J].min(axis=0)) + margin
        X = math.exp(2 * theta) * math.expm1(2 * theta) * dev
        Y = gn / (1 - gn) * (math.exp(2 * theta) * (A + margin) + np.abs(a) + margin + X)
        Z = u * (np.abs(a) + margin + X + Y)
        fine = (X + Y + Z + (3 * n + 2) * eta * (1 + np.abs(V).max())) * (1 + gamma(8))
        assert np.allclose(got[i], np.minimum(coarse, fine), rtol=1e3 * U, atol=0)
        assert np.allclose(loose[i], coarse, rtol=1e3 * U, atol=0)  # tight=False: coarse alone
    default = att.softmax_error_bound(Q, K, V, causal=causal)
    explicit = att.softmax_error_bound(Q, K, V, causal=causal, scale=1 / math.sqrt(d))
    assert np.array_equal(default, explicit)


def test_softmax_error_bound_with_zero_values_is_the_underflow_term():
    """V = 0: the output is exactly 0; only the gradual-underflow term remains."""
    Q, K = RNG.normal(size=(2, 5, 3))
    for dtype in (np.float64, np.float32):
        eta = float(np.finfo(dtype).smallest_subnormal)
        E = att.softmax_error_bound(Q, K, np.zeros((5, 2)), dtype=dtype)
        assert np.all(E == (3 * 5 + 2) * eta * (1 + gamma(6)))
        # 1 + vmax: with |V| = 1 the term doubles next to the weight term
        V1 = np.ones((5, 1))
        E1 = att.softmax_error_bound(Q, K, V1, dtype=dtype)
        assert np.all(E1 > 2 * (3 * 5 + 2) * eta)


def test_softmax_bound_covers_a_float32_run():
    """A float32 run is within the float32 bound of the float64 reference (C1)."""
    Q, K = RNG.normal(size=(2, 12, 4))
    V = RNG.normal(size=(12, 3))
    sref = att.softmax(Q, K, V)
    s32 = att.softmax(Q.astype(np.float32), K.astype(np.float32), V.astype(np.float32))
    sb = att.softmax_error_bound(Q, K, V, dtype=np.float32, extra_ops=2)
    assert s32.dtype == np.float32
    assert np.all(np.abs(s32 - sref) <= sb)


def test_softmax_error_bound_defaults_are_the_documented_ones():
    Q, K, V = RNG.normal(size=(3, 6, 4))
    assert np.array_equal(
        att.softmax_error_bound(Q, K, V),
        att.softmax_error_bound(Q, K, V, causal=False, scale=0.5, dtype=np.float64, extra_ops=0),
    )


@pytest.mark.parametrize("causal", [False, True])
def test_softmax_error_bound_of_a_batch_is_its_members_bit_for_bit(causal):
    """No summation order depends on the batch: the same numbers, not just within 8 u
    (every form's bound agrees with its members' within 8 u: tests/attention/test_families.py)."""
    Q, K = RNG.normal(size=(2, 3, 2, 6, 4))
    V = RNG.normal(size=(3, 2, 6, 2))
    soft = att.softmax_error_bound(Q, K, V, causal=causal)
    assert soft.shape == V.shape
    for b in np.ndindex(3, 2):
        assert np.array_equal(soft[b], att.softmax_error_bound(Q[b], K[b], V[b], causal=causal))


def test_softmax_causal_mask_is_exact_on_a_structured_example():
    """All logits 0: causal softmax is the running mean of V, bidirectional its mean."""
    n = 6
    V = np.arange(n, dtype=float)[:, None]
    Q = K = np.zeros((n, 2))
    expected = np.cumsum(V, axis=0) / np.arange(1, n + 1)[:, None]
    assert np.allclose(att.softmax(Q, K, V, causal=True), expected, rtol=8 * U, atol=0)
    assert np.allclose(att.softmax(Q, K, V), V.mean(), rtol=8 * U, atol=0)


def test_a_single_token_is_its_own_value_exactly():
    """One token: its weight is exp(0) / exp(0) = 1, exactly."""
    one, v = np.array([[0.7]]), np.array([[3.0, -1.0]])
    for causal in (False, True):
        assert np.array_equal(att.softmax(one, one, v, causal=causal), v)


def test_a_causal_softmax_vjp_past_one_mask_block_matches_the_unblocked_formula():
    """Both are float64 evaluations of the same VJP: each within the float64 bound of the
    exact gradient, so within twice the bound of each other."""
    rng = np.random.default_rng(1)
    n = common_vjp._MASK_ROWS + 45
    Q, K, V, G = (rng.standard_normal((n, 3)) for _ in range(4))
    S = Q @ K.T / np.sqrt(3)
    S[np.triu_indices(n, 1)] = -np.inf
    P = np.exp(S - S.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    dP = G @ V.T
    dS = P * (dP - np.sum(P * dP, axis=1, keepdims=True))
    got = softmax_vjp.softmax_vjp(Q, K, V, G, causal=True)
    tol = softmax_vjp.softmax_vjp_error_bound(Q, K, V, G, causal=True)
    plain = (dS @ K / np.sqrt(3), dS.T @ Q / np.sqrt(3), P.T @ G)
    for a, b, t in zip(got, plain, tol, strict=True):
        assert (np.abs(a - b) <= 2 * t).all()


def _softmax_terms(Q, K, V, G, causal, scale):
    """The softmax VJP's float64 quantities over whole n x m arrays, as the formulas read."""
    S = scale * (Q @ np.swapaxes(K, -1, -2))
    if causal:
        S = np.where(np.tril(np.ones(S.shape[-2:], dtype=bool)), S, -np.inf)
    P = np.exp(S - S.max(axis=-1, keepdims=True))
    P /= P.sum(axis=-1, keepdims=True)
    dP = G @ np.swapaxes(V, -1, -2)
    dS = P * (dP - np.sum(P * dP, axis=-1, keepdims=True))
    return P, dP, dS


def _docstring_bound(Q, K, V, G, causal, dt):
    """softmax_vjp_error_bound's docstring formula, term by term, with |dS| its own term."""
    n, d, dv = K.shape[-2], Q.shape[-1], V.shape[-1]
    scale = 1 / np.sqrt(d)
    P, dP, dS = _softmax_terms(Q, K, V, G, causal, scale)
    T = lambda X: np.swapaxes(X, -1, -2)  # noqa: E731
    aQ, aK, aG, aV, aS = (np.abs(X) for X in (Q, K, G, V, dS))
    u, g_n = unit_roundoff(dt), gamma(n, dt)
    c = np.sum(P * dP, axis=-1, keepdims=True)
    r = scale * np.sum(aQ * aK.max(axis=-2, keepdims=True), axis=-1, keepdims=True)
    theta = gamma(d + 2, dt) * r + 2.0 * u * r + (EXP_ULPS + 1) * u
    e, g1 = np.expm1(2.0 * theta), gamma(n + 1, dt)
    rho = e + g1 + e * g1
    g = gamma(n + dv + 2, dt)
    EdV = T(P) @ ((rho + g * (1.0 + rho)) * aG)
    EdP = g * (aG @ T(aV))
    Ec = (rho + g * (1.0 + rho)) * np.sum(aG * (P @ aV), axis=-1, keepdims=True)
    EdS = rho * P * np.abs(dP - c) + P * (EdP + Ec) * (1.0 + rho) + u * aS
    EdQ = scale * (g_n * aS @ aK + EdS @ aK) * (1.0 + u)
    EdK = scale * (g_n * T(aS) @ aQ + T(EdS) @ aQ) * (1.0 + u)
    f64 = 1.0 + gamma(n + d + 8)
    under = (3 * n + 8) * eta(dt) * (1.0 + aG.max()) * (1.0 + aV.max())
    return (EdQ * f64 + under, EdK * f64 + under, EdV * f64 + under), (dS, P)


@pytest.mark.parametrize("blocks", VJP_BLOCKS)
@pytest.mark.parametrize("causal", [False, True])
def test_the_blocked_softmax_bound_is_the_docstring_formula(monkeypatch, causal, blocks):
    """The pass keeps ``P |dP - c|`` once and uses it for ``|dS|`` too (the two are equal
    entry for entry: P >= 0, and a rounded product's magnitude is that of the product
    of the magnitudes), merges the per-row factors of the three ``E_dS`` terms into
    one matrix, and sums over rows block by block, skipping the keys a causal block
    does not see.  None of this changes the bound: against the formula term by term
    over whole arrays it agrees within the rounding of its own evaluation, which its
    factor ``1 + gamma_(n + d + 8)`` covers, twice (two evaluations)."""
    set_vjp_blocks(monkeypatch, blocks)
    rng = np.random.default_rng(4)
    n, d = 70, 5
    Q, K, V, G = (rng.standard_normal((2, n, d)) for _ in range(4))
    for dt in (np.dtype(np.float32), np.dtype(np.float64)):
        want, _ = _docstring_bound(Q, K, V, G, causal, dt)
        got = softmax_vjp.softmax_vjp_error_bound(Q, K, V, G, causal=causal, dtype=dt)
        for a, b in zip(got, want, strict=True):
            np.testing.assert_allclose(a, b, rtol=2 * gamma(n + d + 8))


@pytest.mark.parametrize("blocks", VJP_BLOCKS)
@pytest.mark.parametrize("causal", [False, True])
def test_the_blocked_softmax_vjp_is_the_formula(monkeypatch, causal, blocks):
    """Both are float64 evaluations of the same VJP, each within the float64 bound of the
    exact gradient, so within twice the bound of each other; and the bounds of two
    precisions from one pass are those of separate calls."""
    set_vjp_blocks(monkeypatch, blocks)
    rng = np.random.default_rng(5)
    n, d = 40, 3
    Q, K, V, G = (rng.standard_normal((3, n, d)) for _ in range(4))
    _, (dS, P) = _docstring_bound(Q, K, V, G, causal, np.dtype(np.float64))
    scale = 1 / np.sqrt(d)
    plain = (scale * dS @ K, scale * np.swapaxes(dS, -1, -2) @ Q, np.swapaxes(P, -1, -2) @ G)
    got, (b32, b64) = softmax_vjp.softmax_vjp_with_bounds(
        Q, K, V, G, causal=causal, dtypes=("float32", "float64")
    )
    for a, b, t in zip(got, plain, b64, strict=True):
        assert (np.abs(a - b) <= 2 * t).all()
    for dt, both in (("float32", b32), ("float64", b64)):
        alone = softmax_vjp.softmax_vjp_error_bound(Q, K, V, G, causal=causal, dtype=dt)
        for a, b in zip(both, alone, strict=True):
            np.testing.assert_array_equal(a, b)


def _float32_vjp(Q, K, V, G, causal):
    """A float32 backward pass, step by step as a layer computes it."""
    Q, K, V, G = (X.astype(np.float32) for X in (Q, K, V, G))
    S = (Q @ K.T) * np.float32(1 / np.sqrt(Q.shape[-1]))
    if causal:
        S[np.triu_indices(S.shape[0], 1)] = -np.inf
    P = np.exp(S - S.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    dP = G @ V.T
    dS = P * (dP - np.sum(P * dP, axis=1, keepdims=True))
    s = np.float32(1 / np.sqrt(Q.shape[-1]))
    return (dS @ K) * s, (dS.T @ Q) * s, P.T @ G


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("spread", [1.0, 6.0])
def test_the_softmax_vjp_bound_covers_a_float32_backward_pass(causal, spread):
    """The bound in float32 holds for a float32 backward pass, against the gradient in
    extended precision (``np.longdouble``, 64-bit significand on x86: its own error is
    about 2^-11 of float64's and 2^-40 of float32's, far inside the margin), and the
    float64 bound holds for the float64 reference; ``spread`` scales the queries so the
    logits reach +-20 and the weights are peaked."""
    rng = np.random.default_rng(7)
    n, d = 96, 8
    Q = spread * rng.standard_normal((n, d))
    K, V, G = (rng.standard_normal((n, d)) for _ in range(3))
    L = [X.astype(np.longdouble) for X in (Q, K, V, G)]
    S = (L[0] @ L[1].T) / np.sqrt(np.longdouble(d))
    if causal:
        S[np.triu_indices(n, 1)] = -np.inf
    P = np.exp(S - S.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    dP = L[3] @ L[2].T
    dS = P * (dP - np.sum(P * dP, axis=1, keepdims=True))
    s = 1 / np.sqrt(np.longdouble(d))
    exact = ((dS @ L[1]) * s, (dS.T @ L[0]) * s, P.T @ L[3])
    f64, (b32, b64) = softmax_vjp.softmax_vjp_with_bounds(
        Q, K, V, G, causal=causal, dtypes=("float32", "float64")
    )
    for got, bound in ((_float32_vjp(Q, K, V, G, causal), b32), (f64, b64)):
        for a, x, t in zip(got, exact, bound, strict=True):
            assert (np.abs(a.astype(np.longdouble) - x) <= t).all()


def test_the_softmax_vjp_keeps_a_few_blocks_not_n_by_n_arrays():
    """Peak allocation of softmax_vjp_with_bounds at n = 2048, d = 16: at most its six
    blocks of ``_VJP_BLOCK_ELEMENTS`` entries (weights, ``dP - c``, ``dS``,
    ``P (|G| |V|^T)`` and two of scratch), the absolute values of the four inputs and
    the six results (n x d each), and 1 MiB for NumPy's temporaries of one block's
    rows; a single n x n float64 array is 32 MiB."""
    import tracemalloc

    rng = np.random.default_rng(0)
    n, d = 2048, 16
    Q, K, V, G = (rng.standard_normal((n, d)) for _ in range(4))
    tracemalloc.start()
    try:
        softmax_vjp.softmax_vjp_with_bounds(Q, K, V, G, causal=True, dtypes=("float32",))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    allowed = 8 * (6 * common_vjp._VJP_BLOCK_ELEMENTS + 10 * n * d) + (1 << 20)
    assert peak <= allowed, (peak, allowed)
