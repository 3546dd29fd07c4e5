"""What is peculiar to linear attention from feature maps (claims C10-C12, C14, C19).

Reference computations here are independent of the code under test: a
brute-force Gram matrix ``phi(Q) phi(K)^T`` (masked with ``np.tril`` when
causal) divided row by row (:func:`tests.attention.formulas.brute_linear`),
running means on structured inputs, the exact output in mpmath, and the
formulas of ``linear_error_bound``'s and ``linear_vjp``'s docstrings evaluated
here.  Bad normalisers (C12) are raised or reported, never patched; overflow
is a ``NumericalFailure`` naming the form, without a NumPy warning; the
family's options, state and VJP arguments are refused by name.  The forms are
read from the registry (``get_family("linear").forms``).  The invariants every
family shares are in ``tests/attention/test_families.py`` and
``test_family_inputs.py``; the recurrence engine, blocking and worker threads
in ``tests/attention/common/``; the cost model in ``tests/attention/test_cost.py``.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from kernelcheck import attention as att
from kernelcheck._src.attention.common import vjp as common_vjp
from kernelcheck._src.attention.families.linear import vjp as linear_vjp
from kernelcheck._src.core.rounding import eta, gamma, unit_roundoff
from kernelcheck.errors import BadNormalizer, InvalidArgument, NumericalFailure
from kernelcheck.kernels import Linear, exp
from tests.attention.formulas import brute_linear, quotient_bound
from tests.attention.inputs import G_OUT, PK, PQ, S0, VJP_BLOCKS, V, set_vjp_blocks

#: The forms of the linear family, from the registry.
LINEAR_FORMS = att.get_family("linear").forms
#: Every (form, mask) of the family: the masks each form computes.
LINEAR_RUNS = [(f, c) for f in LINEAR_FORMS for c in ((True,) if f.causal_only else (False, True))]
LINEAR_RUN_IDS = [f.name + ("-causal" if c and not f.causal_only else "") for f, c in LINEAR_RUNS]


def _chunkings(form, *sizes) -> list[dict]:
    """The keyword options of ``form`` for each chunk size (one empty set without chunks)."""
    return [{"chunk_size": s} for s in sizes] if "chunk_size" in form.options else [{}]


#: The linear recurrence's init / step pair (claims C11, C14).
LINEAR = att.linear_recurrence()


def _rng(seed=0):
    return np.random.default_rng(seed)


RNG = np.random.default_rng(7)
U = unit_roundoff(np.float64)
ETA = float(np.finfo(np.float64).smallest_subnormal)


# ---------------------------------------------------------------------------
# Kernelized and linear forms against the brute-force formula
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("batch", [(), (2,), (2, 3)])
def test_parallel_matches_brute_force(causal, batch):
    rng = _rng(8)
    pq, pk = rng.random((2,) + batch + (10, 6))
    V = rng.normal(size=batch + (10, 3))
    ref, _ = brute_linear(pq, pk, V, causal)
    tol = 2 * att.linear_error_bound(pq, pk, V, causal=causal)
    assert (np.abs(att.parallel(pq, pk, V, causal=causal) - ref) <= tol).all()


@pytest.mark.parametrize("chunk_size", [1, 2, 3, 7, 10, 11, 64])
def test_chunked_matches_brute_force(chunk_size):
    rng = _rng(9)
    pq, pk = rng.random((2, 2, 10, 5))
    V = rng.normal(size=(2, 10, 4))
    ref, _ = brute_linear(pq, pk, V, True)
    tol = 2 * att.linear_error_bound(pq, pk, V, causal=True)
    assert (np.abs(att.chunked(pq, pk, V, chunk_size=chunk_size) - ref) <= tol).all()


def test_causal_masks_are_exact_on_a_structured_example():
    """Equal weights: causal attention is the running mean of V, bidirectional its mean,
    for every form and chunk size (a key j > i that leaked into row i would move it)."""
    n = 6
    V = np.arange(n, dtype=float)[:, None]
    expected = np.cumsum(V, axis=0) / np.arange(1, n + 1)[:, None]
    ones = np.ones((n, 1))
    for form in LINEAR_FORMS:
        for kw in _chunkings(form, 4, 1, 100):
            out = form.call(ones, ones, V, causal=True, **kw)
            assert np.allclose(out, expected, rtol=8 * U, atol=0), (form.name, kw)
        if not form.causal_only:  # bidirectional: every row is the mean
            assert np.allclose(form.call(ones, ones, V, causal=False), V.mean(), rtol=8 * U, atol=0)


def test_a_single_token_is_its_own_value_exactly():
    """One token: every linear form divides its weight by itself, exactly 1."""
    one, v = np.array([[0.7]]), np.array([[3.0, -1.0]])
    for form in att.get_family("linear").forms:
        for causal in (True,) if form.causal_only else (False, True):
            assert np.array_equal(form.call(one, one, v, causal=causal), v), form.name


# ---------------------------------------------------------------------------
# Bad normalisers (C12): raised or reported, never patched
# ---------------------------------------------------------------------------


def _signed_features():
    rng = _rng(16)
    pq = rng.normal(size=(12, 3))
    pk = rng.normal(size=(12, 3))
    return pq, pk, rng.normal(size=(12, 2))


@pytest.mark.parametrize("form, causal", LINEAR_RUNS, ids=LINEAR_RUN_IDS)
def test_bad_normalisers_raise_then_report(form, causal):
    pq, pk, V = _signed_features()
    kw = _chunkings(form, 5)[0]
    with pytest.raises(BadNormalizer) as info:
        form.call(pq, pk, V, causal=causal, **kw)
    res = form.call(pq, pk, V, causal=causal, on_bad_normalizer="report", **kw)
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


def test_overflowing_features_raise():
    pq = np.full((3, 2), 1e200)
    with pytest.raises(NumericalFailure):
        att.parallel(pq, pq, np.ones((3, 1)))


def test_attention_output_report_fields_and_text():
    phi = np.array([[1.0], [-1.0], [2.0]])
    V = np.array([[1.0], [2.0], [3.0]])
    res = att.parallel(phi, phi, V, causal=True, on_bad_normalizer="report")
    # normalisers are phi_i * sum_{j <= i} phi_j: 1, -1 * 0 = -0, 2 * 2 = 4
    assert np.array_equal(res.normalizer, [1.0, 0.0, 4.0])
    assert res.bad_positions.tolist() == [[1]]
    assert not res.ok
    assert np.array_equal(res.bad_values, [0.0])
    assert str(res) == (
        "attention output of shape (3, 1); 1 of 3 normalisers <= 0 (first at (1,): 0)"
    )
    good = att.parallel(np.abs(phi), np.abs(phi), V, on_bad_normalizer="report")
    assert good.ok and good.bad_positions.shape == (0, 1)
    assert str(good) == "attention output of shape (3, 1); all 3 normalisers > 0"
    assert np.array_equal(good.out, att.parallel(np.abs(phi), np.abs(phi), V))
    with pytest.raises(BadNormalizer) as info:
        att.parallel(phi, phi, V, causal=True)
    assert info.value.positions.tolist() == [[1]]
    assert str(info.value).startswith(
        "1 of 3 attention normalisers are <= 0 in `parallel` (first at position (1,): 0); "
        "the features are not positive (odd Taylor order or trigonometric features, claim "
        "C12). kernelcheck never adds an eps: pass on_bad_normalizer='report' to get the "
        "raw output with the bad positions"
    )


@pytest.mark.parametrize("form", [f.name for f in LINEAR_FORMS] + ["step"])
def test_bad_normalizer_messages_name_the_form(form):
    phi = np.array([[1.0], [-1.0]])
    V = np.ones((2, 1))
    if form == "step":
        call = lambda: LINEAR.step(LINEAR.init(1, 1), [-1.0], [1.0], [1.0])  # noqa: E731
    else:
        call = lambda: att.get_form(form).function(phi, phi, V)  # noqa: E731
    with pytest.raises(BadNormalizer, match=rf"normalisers are <= 0 in `{form}` \(first at"):
        call()


# ---------------------------------------------------------------------------
# Clean failures carry the form's name and leak no NumPy warning
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "form, causal", LINEAR_RUNS + [(None, True)], ids=LINEAR_RUN_IDS + ["step"]
)
def test_overflow_raises_numerical_failure_without_runtime_warnings(form, causal):
    import warnings

    big = np.full((3, 2), 1e200)
    V = np.ones((3, 1))
    if form is None:
        name = "step"
        call = lambda: LINEAR.step(LINEAR.init(2, 1), big[0], big[0], V[0])  # noqa: E731
    else:
        name = form.name
        call = lambda: form.call(big, big, V, causal=causal, **_chunkings(form, 2)[0])  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an overflow warning escaping would raise here
        with pytest.raises(
            NumericalFailure,
            match=rf"^`{name}` attention overflowed: a numerator "
            r"or normaliser is not finite \(float64\); scale the features or "
            r"inputs down$",
        ):
            call()


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


# ---------------------------------------------------------------------------
# The division by the normalisers: a true division wherever they are
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("sq, sk", [(1e-160, 1e-160), (1e154, 5e153)])
def test_forms_divide_normalisers_at_the_ends_of_the_range(sq, sk):
    """Normalisers below the smallest normal number (features ~1e-160: products ~1e-320)
    have no finite reciprocal, normalisers near the top of the range (~5e307) a subnormal
    one: every form divides, and the quotient is the weighted mean it must be."""
    n = 3
    pq, pk = np.full((n, 1), sq), np.full((n, 1), sk)
    V = np.array([[0.25], [0.5], [1.0]])
    expected = np.cumsum(V, axis=0) / np.arange(1, n + 1)[:, None]
    for form in LINEAR_FORMS:
        out = form.call(pq, pk, V, causal=True, **_chunkings(form, 2)[0])
        assert np.allclose(out, expected, rtol=8 * U, atol=0), form.name
        if not form.causal_only:
            bidi = form.call(pq[:1], pk[:1], V[:1], causal=False)
            assert np.allclose(bidi, V[:1], rtol=8 * U, atol=0), form.name


# ---------------------------------------------------------------------------
# Bad input: options, states, the bound's and the VJP's arguments
# ---------------------------------------------------------------------------


#: the linear forms' options, their bound's and their VJP's (id, call, error, message regex)
LINEAR_BAD = [
    (
        "parallel-action",
        lambda: att.parallel(PQ, PK, V, on_bad_normalizer="ignore"),
        InvalidArgument,
        r"^`on_bad_normalizer` must be one of 'raise', 'report'; got 'ignore'",
    ),
    (
        "chunked-action",
        lambda: att.chunked(PQ, PK, V, on_bad_normalizer=None),
        InvalidArgument,
        r"^`on_bad_normalizer` must be one of 'raise', 'report'; got None",
    ),
    (
        "recurrent-return-state",
        lambda: att.recurrent(PQ, PK, V, return_state="yes"),
        InvalidArgument,
        r"^`return_state` must be True or False, got str 'yes'",
    ),
    (
        "chunked-size-zero",
        lambda: att.chunked(PQ, PK, V, chunk_size=0),
        InvalidArgument,
        r"^`chunk_size` must be >= 1, got 0",
    ),
    (
        "chunked-size-float",
        lambda: att.chunked(PQ, PK, V, chunk_size=2.0),
        InvalidArgument,
        r"^`chunk_size` must be an integer \(got the float 2\.0",
    ),
    (
        "chunked-size-bool",
        lambda: att.chunked(PQ, PK, V, chunk_size=True),
        InvalidArgument,
        r"^`chunk_size` must be an integer",
    ),
    (
        "leb-dtype-f16",
        lambda: att.linear_error_bound(PQ, PK, V, dtype=np.float16),
        InvalidArgument,
        r"^`dtype` must be float64 or float32, got float16",
    ),
    (
        "leb-dtype-junk",
        lambda: att.linear_error_bound(PQ, PK, V, dtype="junk"),
        InvalidArgument,
        r"^`dtype` must be float64 or float32, got 'junk'",
    ),
    (
        "leb-extra-neg",
        lambda: att.linear_error_bound(PQ, PK, V, extra_ops=-1),
        InvalidArgument,
        r"^`extra_ops` must be >= 0, got -1",
    ),
    (
        "recurrent-state-bidirectional-parallel",
        lambda: att.linear_error_bound(PQ, PK, V, initial_state=S0),
        InvalidArgument,
        r"^`initial_state` applies to causal attention",
    ),
    (
        "chunked-state-z-shape",
        lambda: att.chunked(PQ, PK, V, initial_state=att.State(S0.S, np.zeros(3))),
        InvalidArgument,
        r"^`initial_state.z` must have last dimension D = 4, got array of shape \(3,\)",
    ),
    (
        "linear_vjp-G-shape",
        lambda: att.linear_vjp(PQ, PK, V, np.ones((5, 3))),
        InvalidArgument,
        r"^`G` must have the output's shape \(5, 2\)",
    ),
    (
        "linear_vjp-normalize",
        lambda: att.linear_vjp(PQ, PK, V, G_OUT, normalize="yes"),
        InvalidArgument,
        r"^`normalize` must be True or False",
    ),
    (
        "linear_vjp_error_bound-G",
        lambda: att.linear_vjp_error_bound(PQ, PK, V, "G"),
        InvalidArgument,
        r"^`G` must be a numeric array, got str",
    ),
    (
        "parallel action",
        lambda: att.parallel(PQ, PK, V, on_bad_normalizer=None),
        InvalidArgument,
        r"^`on_bad_normalizer` must be one of 'raise', 'report'; got None",
    ),
    (
        "chunked chunk_size -3",
        lambda: att.chunked(PQ, PK, V, chunk_size=-3),
        InvalidArgument,
        r"^`chunk_size` must be >= 1, got -3",
    ),
]


@pytest.mark.parametrize(
    "call, error, message", [c[1:] for c in LINEAR_BAD], ids=[c[0] for c in LINEAR_BAD]
)
def test_bad_input_table(call, error, message):
    """Each row raises the expected clean error, its message matched from the start."""
    with pytest.raises(error, match=message):
        call()


# ---------------------------------------------------------------------------
# Extreme values: a correct answer or a clean error
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("form", [f.name for f in LINEAR_FORMS])
def test_linear_forms_overflow_is_a_clean_error(form):
    big = np.full((3, 2), 1e200)
    with pytest.raises(NumericalFailure, match=rf"^`{form}` attention overflowed"):
        att.get_form(form).function(big, big, np.ones((3, 1)))


@pytest.mark.parametrize("form", [f.name for f in LINEAR_FORMS])
def test_underflowing_features_give_bad_normalizers_not_nan(form):
    fn = att.get_form(form).function
    tiny = np.full((3, 2), 1e-200)  # phi(q) . phi(k) = 2e-400 underflows to 0
    with pytest.raises(BadNormalizer) as info:
        fn(tiny, tiny, np.ones((3, 1)))
    assert info.value.positions.shape == (3, 1)
    assert np.array_equal(info.value.values, np.zeros(3))
    report = fn(tiny, tiny, np.ones((3, 1)), on_bad_normalizer="report")
    assert not report.ok
    assert report.bad_positions.shape == (3, 1)


def test_tiny_but_representable_features_are_exact():
    """Features of 1e-150: products 1e-300 stay normal, the outputs are exact averages."""
    tiny = np.full((4, 1), 1e-150)
    Vt = np.arange(4.0)[:, None]
    expected = np.cumsum(Vt, axis=0) / np.arange(1, 5)[:, None]  # causal mean of 0..i
    for form in LINEAR_FORMS:
        out = form.call(tiny, tiny, Vt, causal=True, **_chunkings(form, 3)[0])
        assert np.allclose(out, expected, rtol=1e-14, atol=0), form.name


def test_linear_error_bound_is_finite_or_inf_never_nan():
    big = np.full((2, 2), 1e200)
    for bound in (
        att.linear_error_bound(big, big, np.ones((2, 1))),
        att.linear_error_bound(np.zeros((2, 2)), np.zeros((2, 2)), np.ones((2, 1))),
    ):
        assert not np.isnan(bound).any()
        assert (bound >= 0).all()


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


def test_bounds_cover_float32_runs():
    """A float32 run is within the float32 bound of the float64 reference (C14)."""
    pq = RNG.random((2, 12, 4)) + 0.1
    pk = RNG.random((2, 12, 4)) + 0.1
    V = RNG.normal(size=(2, 12, 3))
    ref = att.parallel(pq, pk, V, causal=True)
    f32 = [x.astype(np.float32) for x in (pq, pk, V)]
    bound = att.linear_error_bound(pq, pk, V, causal=True, dtype=np.float32, extra_ops=2)
    for out in (
        att.parallel(*f32, causal=True),
        att.recurrent(*f32),
        att.chunked(*f32, chunk_size=5),
    ):
        assert out.dtype == np.float32
        assert np.all(np.abs(out - ref) <= bound)


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
    expected = quotient_bound(absH * (1 + g64), E + under, H[:, -1])
    got = att.linear_error_bound(pq, pk, V, causal=causal, extra_ops=extra)
    assert np.allclose(got, expected, rtol=1e3 * U, atol=0)
    # float32 adds the float64 model of the reference normaliser
    got32 = att.linear_error_bound(pq, pk, V, causal=causal, extra_ops=extra, dtype=np.float32)
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
    E = att.linear_error_bound(pq, pq, V, causal=True)
    # normalisers 1, 0 (exactly: 1 - 1), 1: the middle one's sign is uncertain
    assert np.isfinite(E[0]).all() and np.isinf(E[1]).all() and np.isfinite(E[2]).all()


# ---------------------------------------------------------------------------
# Defaults, batches, the underflow term
# ---------------------------------------------------------------------------


def test_linear_error_bound_defaults_are_the_documented_ones():
    pq, pk = np.abs(RNG.normal(size=(2, 6, 4))) + 0.1
    V = RNG.normal(size=(6, 2))
    assert np.array_equal(
        att.linear_error_bound(pq, pk, V),
        att.linear_error_bound(pq, pk, V, causal=False, dtype=np.float64, extra_ops=0),
    )


def _linear_docstring(pq, pk, V, G, causal, normalize, dt, extra):
    """linear_vjp and linear_vjp_error_bound's docstring formulas over whole n x m arrays."""
    n, D, dv = pk.shape[-2], pq.shape[-1], V.shape[-1]
    T = lambda X: np.swapaxes(X, -1, -2)  # noqa: E731
    keep = np.tril(np.ones((pq.shape[-2], n), dtype=bool)) if causal else True
    W = np.where(keep, pq @ T(pk), 0.0)
    g = gamma(n + dv + D + 2 + extra, dt)
    gw = gamma(D + extra, dt)
    if normalize:
        den = W.sum(axis=-1, keepdims=True)
        a = (W @ V) / den
        dW = np.where(keep, (G @ T(V) - np.sum(G * a, axis=-1, keepdims=True)) / den, 0.0)
        dV = T(W) @ (G / den)
        rho_a = gamma(2 * n + 2 * D + 4 + extra, dt)
        rho_a = 2.0 * rho_a / (1.0 - rho_a)
        mag = (np.abs(G) @ T(np.abs(V)) + np.abs(np.sum(G * a, axis=-1, keepdims=True))) / den
        EdW = ((1 + g) * (1 + 2 * rho_a) - 1) * np.where(keep, mag, 0.0)
        EdV = ((1 + g) * (1 + gw) * (1 + rho_a) - 1) * (T(np.abs(W)) @ (np.abs(G) / den))
    else:
        dW = np.where(keep, G @ T(V), 0.0)
        dV = T(W) @ G
        EdW = g * np.where(keep, np.abs(G) @ T(np.abs(V)), 0.0)
        EdV = ((1 + g) * (1 + gw) - 1) * (T(np.abs(W)) @ np.abs(G))
    Edq = g * np.abs(dW) @ np.abs(pk) + EdW @ np.abs(pk)
    Edk = g * T(np.abs(dW)) @ np.abs(pq) + T(EdW) @ np.abs(pq)
    f64 = 1.0 + gamma(3 * n + D + 8)
    top = max(np.abs(X).max() for X in (pq, pk, V, G))
    under = (3 * n + 8) * eta(dt) * (1.0 + top) ** 3
    bound = (Edq * f64 + under, Edk * f64 + under, EdV * f64 + under)
    return (dW @ pk, T(dW) @ pq, dV), bound


@pytest.mark.parametrize("blocks", VJP_BLOCKS)
@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("causal", [False, True])
def test_the_blocked_linear_vjp_and_bound_are_the_docstring_formulas(
    monkeypatch, causal, normalize, blocks
):
    """The linear pass forms its weights a block of query rows at a time and skips the
    keys a causal block does not see: its VJP is within twice the float64 bound of the
    formula's over whole arrays (two float64 evaluations of one gradient), and its bound
    in two models within twice its own evaluation factor ``1 + gamma_(3n + D + 8)``."""
    set_vjp_blocks(monkeypatch, blocks)
    rng = np.random.default_rng(8)
    n, D = 60, 4
    pq, pk = (0.1 + rng.random((2, n, D)) for _ in range(2))
    V, G = (rng.standard_normal((2, n, 3)) for _ in range(2))
    models = (("float32", 2), ("float64", 0))
    got, bounds = linear_vjp.linear_vjp_with_bounds(
        pq, pk, V, G, causal=causal, normalize=normalize, models=models
    )
    for (dt, extra), b in zip(models, bounds, strict=True):
        plain, want = _linear_docstring(pq, pk, V, G, causal, normalize, np.dtype(dt), extra)
        for x, y in zip(b, want, strict=True):
            np.testing.assert_allclose(x, y, rtol=2 * gamma(3 * n + D + 8))
    for x, y, t in zip(got, plain, bounds[1], strict=True):
        assert (np.abs(x - y) <= 2 * t).all()
    alone = linear_vjp.linear_vjp(pq, pk, V, G, causal=causal, normalize=normalize)
    for x, y in zip(alone, got, strict=True):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("blocks", VJP_BLOCKS)
def test_a_bad_normaliser_in_any_block_refuses_the_linear_vjp(monkeypatch, blocks):
    """Row 40's features are zero, so its normaliser is 0: whichever block holds it, the
    VJP is refused, never returned with a division by zero in it."""
    set_vjp_blocks(monkeypatch, blocks)
    rng = np.random.default_rng(9)
    pq, pk = 0.1 + rng.random((60, 4)), 0.1 + rng.random((60, 4))
    pq[40] = 0.0
    V, G = rng.standard_normal((2, 60, 3))
    with pytest.raises(NumericalFailure, match="normaliser is <= 0"):
        linear_vjp.linear_vjp(pq, pk, V, G, causal=True)


def test_the_linear_vjp_keeps_a_few_blocks_not_n_by_n_arrays():
    """Peak allocation of linear_vjp_with_bounds at n = 2048, D = 16, d_v = 16: at most
    its three blocks of ``_VJP_BLOCK_ELEMENTS`` entries (``W``, ``dW``, ``mag``), the
    absolute values of the four inputs and eleven n x D results, and 1 MiB for NumPy's
    temporaries of one block's rows; a single n x n float64 array is 32 MiB."""
    import tracemalloc

    rng = np.random.default_rng(0)
    n, D = 2048, 16
    pq, pk = (0.1 + rng.random((n, D)) for _ in range(2))
    V, G = (rng.standard_normal((n, D)) for _ in range(2))
    tracemalloc.start()
    try:
        linear_vjp.linear_vjp_with_bounds(pq, pk, V, G, causal=True, models=(("float32", 2),))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    allowed = 8 * (3 * common_vjp._VJP_BLOCK_ELEMENTS + 15 * n * D) + (1 << 20)
    assert peak <= allowed, (peak, allowed)
