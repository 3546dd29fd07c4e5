"""Tests of ``verify.attention`` (claims C1, C10, C14): correct layers pass, broken ones fail.

The implementations under test are written here independently of
kernelcheck's forms (plain NumPy, the way a user's layer is written), and the
mutants are the bugs the verifier must catch: a causal mask shifted by one, a
missing normaliser, a wrong logit scale, a feature map applied to V or to Q
only.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from kernelcheck import attention as att
from kernelcheck import verify
from kernelcheck._src.verify.attention.api import assert_attention_matches
from kernelcheck._src.verify.attention.cases import CASES
from kernelcheck.errors import InvalidArgument
from kernelcheck.kernels import Linear, Polynomial, exp


def _T(X):
    return np.swapaxes(X, -1, -2)


def _softmax_layer(
    scale_fn=lambda d: 1 / np.sqrt(d), causal=False, shift=0, normalise=True, dtype=np.float64
):
    """Plain NumPy softmax attention; ``shift`` moves the causal diagonal (0 is correct)."""

    def fn(Q, K, V):
        Q, K, V = (np.asarray(a, dtype=dtype) for a in (Q, K, V))
        n = Q.shape[-2]
        S = (Q @ _T(K)) * dtype(scale_fn(Q.shape[-1]))
        if causal:
            S = np.where(np.tril(np.ones((n, n), bool), shift), S, -np.inf)
        with np.errstate(invalid="ignore"):
            W = np.exp(S - S.max(axis=-1, keepdims=True))
        if normalise:
            with np.errstate(invalid="ignore"):
                W = W / W.sum(axis=-1, keepdims=True)
        return W @ V

    return fn


def _online_softmax_float32(Q, K, V, block=3):
    """Flash-style streaming softmax in float32 (running max and sum)."""
    Q, K, V = (np.asarray(a, dtype=np.float32) for a in (Q, K, V))
    scale = np.float32(1 / np.sqrt(Q.shape[-1]))
    m = np.full(Q.shape[:-1], -np.inf, np.float32)
    l = np.zeros(Q.shape[:-1], np.float32)
    acc = np.zeros(Q.shape[:-1] + (V.shape[-1],), np.float32)
    for j0 in range(0, Q.shape[-2], block):
        s = (Q @ _T(K[..., j0 : j0 + block, :])) * scale
        new = np.maximum(m, s.max(axis=-1))
        alpha = np.exp(m - new)
        p = np.exp(s - new[..., None])
        l = l * alpha + p.sum(axis=-1)
        acc = acc * alpha[..., None] + p @ V[..., j0 : j0 + block, :]
        m = new
    return acc / l[..., None]


def elu1(X):
    """elu(x) + 1, the positive feature map of Katharopoulos et al. (2020)."""
    X = np.asarray(X, dtype=np.float64)
    return np.where(X > 0, X + 1.0, np.exp(np.minimum(X, 0.0)))


def _linear_layer(phi_q=elu1, phi_k=elu1, phi_v=None, causal=False, normalise=True):
    """Plain NumPy linear attention: a loop over tokens when causal, two products otherwise."""

    def fn(Q, K, V):
        pq, pk = phi_q(Q), phi_k(K)
        if phi_v is not None:
            V = phi_v(V)
        if not causal:
            num = pq @ (_T(pk) @ V)
            den = (
                pq @ pk.sum(axis=-2)[..., None]
                if pq.ndim == 2
                else np.einsum("...nd,...d->...n", pq, pk.sum(axis=-2))[..., None]
            )
        else:
            S = np.zeros(pk.shape[:-2] + (pk.shape[-1], V.shape[-1]))
            z = np.zeros(pk.shape[:-2] + (pk.shape[-1],))
            num = np.empty(pq.shape[:-1] + (V.shape[-1],))
            den = np.empty(pq.shape[:-1] + (1,))
            for t in range(pq.shape[-2]):
                S = S + pk[..., t, :, None] * V[..., t, None, :]
                z = z + pk[..., t, :]
                num[..., t, :] = np.einsum("...d,...dm->...m", pq[..., t, :], S)
                den[..., t, 0] = np.einsum("...d,...d->...", pq[..., t, :], z)
        return num / den if normalise else num

    return fn


# ---------------------------------------------------------------------------
# Correct implementations pass
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("batch", [(), (2, 3)])
def test_correct_softmax_passes(causal, batch):
    report = verify.attention(_softmax_layer(causal=causal), causal=causal, batch_shape=batch)
    assert report.passed, report.details()
    assert [c.name for c in report.cases] == list(CASES)
    assert all(c.passed for c in report.cases)


def test_float32_streaming_softmax_passes():
    report = verify.attention(_online_softmax_float32)
    assert report.passed, report.details()
    assert report.worst_error > 1e-10  # it really computed in float32 (error ~ u32)


def test_kernelcheck_forms_pass_as_implementations():
    assert verify.attention(lambda Q, K, V: att.softmax(Q, K, V, causal=True), causal=True).passed
    k = Polynomial(2, c=1.0)
    assert verify.attention(lambda Q, K, V: att.kernelized(Q, K, V, k), kernel=k).passed
    phi = exp(Linear(), order=2).features()
    for C in (1, 5):
        layer = lambda Q, K, V, C=C: att.chunked(phi(Q), phi(K), V, chunk_size=C)  # noqa: E731
        assert verify.attention(layer, feature_map=phi, causal=True).passed


def test_a_layer_with_a_chunk_size_is_checked_at_several_sizes():
    phi = exp(Linear(), order=2).features()

    def layer(Q, K, V, chunk_size=64):
        return att.chunked(phi(Q), phi(K), V, chunk_size=chunk_size)

    def wrong_across_chunks(Q, K, V, chunk_size=64):  # right within the first chunk only
        out = att.chunked(phi(Q), phi(K), V, chunk_size=chunk_size)
        out[chunk_size:] *= 1.01
        return out

    kw = dict(feature_map=phi, causal=True, cases=("random",))
    good = verify.attention(layer, **kw)
    assert good.passed, good.details()
    assert [c.name for c in good.checks if c.name.startswith("chunk")] == [
        "chunk_size=1", "chunk_size=3", "chunk_size=16"
    ]  # fmt: skip
    bad = verify.attention(wrong_across_chunks, **kw)
    assert bad.cases[0].passed  # the default chunk covers the whole case ...
    assert {"chunk_size=1", "chunk_size=3"} <= {c.name for c in bad.failures()}  # ... not these


def test_a_layer_taking_only_kwargs_is_not_handed_a_chunk_size():
    phi = exp(Linear(), order=2).features()

    def layer(Q, K, V, **kwargs):
        assert not kwargs, kwargs
        return att.parallel(phi(Q), phi(K), V, causal=True)

    report = verify.attention(layer, feature_map=phi, causal=True, cases=("random",))
    assert report.passed, report.details()
    assert not any(c.name.startswith("chunk") for c in report.checks)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("batch", [(), (2,)])
def test_correct_linear_attention_passes(causal, batch):
    report = verify.attention(
        _linear_layer(causal=causal), feature_map=elu1, causal=causal, batch_shape=batch
    )
    assert report.passed, report.details()


def test_hand_built_taylor_features_pass():
    """The user's own Taylor map (tensor form, different order) matches the kernelcheck map."""

    def phi(X):
        X = np.asarray(X)
        outer = (X[..., :, None] * X[..., None, :]).reshape(X.shape[:-1] + (-1,)) / np.sqrt(2.0)
        return np.concatenate([np.ones(X.shape[:-1] + (1,)), X, outer], axis=-1)

    ref = exp(Linear(), order=2).features()
    report = verify.attention(_linear_layer(phi, phi), feature_map=ref)
    assert report.passed, report.details()


def test_kernel_reference_correct_and_missing_normaliser():
    k = Polynomial(2, c=1.0)

    def layer(Q, K, V, normalise=True):
        G = (Q @ _T(K) + 1.0) ** 2
        return (G @ V) / G.sum(axis=-1, keepdims=True) if normalise else G @ V

    assert verify.attention(layer, kernel=k).passed
    assert not verify.attention(lambda Q, K, V: layer(Q, K, V, False), kernel=k).passed


# ---------------------------------------------------------------------------
# Mutants fail
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("shift", [-1, 1], ids=["j<i", "j<=i+1"])
def test_causal_mask_shifted_by_one_fails(shift):
    report = verify.attention(_softmax_layer(causal=True, shift=shift), causal=True)
    assert not report.passed
    assert "random" in {c.name for c in report.failures()}


def test_bidirectional_layer_fails_causal_check_and_vice_versa():
    assert not verify.attention(_softmax_layer(causal=False), causal=True).passed
    assert not verify.attention(_softmax_layer(causal=True), causal=False).passed


def test_missing_normaliser_fails():
    report = verify.attention(_softmax_layer(normalise=False))
    assert not report.passed
    linear = verify.attention(_linear_layer(normalise=False), feature_map=elu1)
    assert not linear.passed


@pytest.mark.parametrize(
    "scale_fn",
    [
        lambda d: 1.0 / d,
        lambda d: 1.0,
        lambda d: 1.0 / np.sqrt(d) ** 2,
        lambda d: 1.0 / np.sqrt(d + 1),
    ],
    ids=["1/d", "none", "squared", "1/sqrt(d+1)"],
)
def test_wrong_scale_fails(scale_fn):
    report = verify.attention(_softmax_layer(scale_fn=scale_fn))
    assert not report.passed
    assert report.worst_case in {c.name for c in report.failures()}


def test_feature_map_on_values_fails():
    report = verify.attention(_linear_layer(phi_v=elu1), feature_map=elu1)
    assert not report.passed


def test_feature_map_on_queries_only_fails():
    report = verify.attention(_linear_layer(phi_k=lambda K: K), feature_map=elu1)
    assert not report.passed


def test_feature_map_on_values_with_other_width_fails_on_shape():
    def phi(X):
        return np.concatenate([elu1(X), elu1(-X)], axis=-1)  # D = 2 d

    report = verify.attention(_linear_layer(phi, phi, phi_v=phi), feature_map=phi)
    assert not report.passed
    assert "shape" in report.cases[0].note


def test_raising_and_nan_implementations_fail():
    def boom(Q, K, V):
        if Q.shape[-2] == 1:
            raise ValueError("n = 1 not supported")
        return att.softmax(Q, K, V)

    report = verify.attention(boom)
    assert not report.passed
    failed = report.failures()
    assert [c.name for c in failed] == ["n=1"] and "ValueError" in failed[0].note
    nan = verify.attention(lambda Q, K, V: np.full(V.shape, np.nan))
    assert not nan.passed and "non-finite" in nan.cases[0].note


def test_naive_softmax_overflows_on_large_norms():
    """exp without the max shift overflows on the 'large norms' case (logits ~ 1000)."""

    def naive(Q, K, V):
        with np.errstate(over="ignore", invalid="ignore"):
            W = np.exp(Q @ _T(K) / np.sqrt(Q.shape[-1]))
            return (W / W.sum(axis=-1, keepdims=True)) @ V

    report = verify.attention(naive)
    assert not report.passed
    assert [c.name for c in report.failures()] == ["large norms"]


# ---------------------------------------------------------------------------
# Skipped cases, report, determinism
# ---------------------------------------------------------------------------


def test_undefined_reference_cases_are_skipped():
    """Odd Taylor order: normalisers <= 0 on large norms; a fixed-d map refuses d = 1."""
    phi = exp(Linear(), order=1).features()
    report = verify.attention(lambda Q, K, V: att.parallel(phi(Q), phi(K), V), feature_map=phi)
    skipped = {c.name for c in report.skipped()}
    assert "large norms" in skipped
    assert report.passed  # every judged case matches

    def fixed(X):
        if X.shape[-1] != 8:
            raise InvalidArgument("`X` must have d = 8 columns")
        return elu1(X)

    report = verify.attention(_linear_layer(fixed, fixed), feature_map=fixed)
    assert [c.name for c in report.skipped()] == ["d=1"]
    assert "d=1: skipped" in report.details()


def test_report_contents_and_json():
    report = verify.attention(_softmax_layer(scale_fn=lambda d: 1.0), seed=3)
    text = str(report)
    assert text.startswith("refuted: ") and "softmax" in text and "worst error" in text
    data = json.loads(report.to_json())
    assert data["passed"] is False and data["seed"] == 3
    assert data["tolerance"]["source"].startswith("softmax_error_bound")
    assert len(data["cases"]) == len(CASES)
    worst = next(c for c in report.cases if c.name == report.worst_case)
    assert report.worst_error == worst.error and report.where == worst.where
    assert worst.error > report.tolerance.value
    good = verify.attention(_softmax_layer())
    assert str(good).startswith("verified: ") and good.worst_error <= good.tolerance.value


def test_same_seed_same_report():
    fn = _softmax_layer()
    assert verify.attention(fn, seed=7).to_json() == verify.attention(fn, seed=7).to_json()
    assert verify.attention(fn, seed=7).to_json() != verify.attention(fn, seed=8).to_json()


def test_inputs_are_copies():
    """A layer that writes into its inputs cannot corrupt the reference."""

    def vandal(Q, K, V):
        out = att.softmax(Q, K, V)
        Q[...] = 0.0
        V[...] = 1e9
        return out

    assert verify.attention(vandal).passed


def test_assert_twin():
    report = assert_attention_matches(_softmax_layer(), n=5, d=3)
    assert report.passed
    with pytest.raises(AssertionError, match="^refuted: case 'random'") as info:
        assert_attention_matches(_softmax_layer(normalise=False))
    assert "random" in str(info.value) and "tiny norms" in str(info.value)


BAD_CALLS = [
    ("fn", lambda: verify.attention(3), "`fn` must be callable"),
    ("both", lambda: verify.attention(np.add, kernel=Linear(), feature_map=elu1), "at most one"),
    ("kernel", lambda: verify.attention(np.add, kernel="exp"), "`kernel` must be callable"),
    (
        "feature_map",
        lambda: verify.attention(np.add, feature_map=2),
        "`feature_map` must be callable",
    ),
    ("scale with kernel", lambda: verify.attention(np.add, kernel=Linear(), scale=0.5), "`scale`"),
    ("scale", lambda: verify.attention(np.add, scale=0), "`scale`"),
    ("n", lambda: verify.attention(np.add, n=1), "`n` must be >= 2"),
    ("d", lambda: verify.attention(np.add, d=0), "`d` must be >= 1"),
    ("d_v", lambda: verify.attention(np.add, d_v=2.5), "`d_v` must be an integer"),
    ("seed", lambda: verify.attention(np.add, seed=None), "`seed` must be given"),
    ("batch", lambda: verify.attention(np.add, batch_shape=[2]), "`batch_shape`"),
    ("dtype", lambda: verify.attention(np.add, dtype=np.longdouble), "`dtype`"),
    (
        "bfloat16 in numpy",
        lambda: verify.attention(np.add, dtype="bfloat16"),
        "NumPy has no bfloat16",
    ),
    ("causal", lambda: verify.attention(np.add, causal=1), "`causal`"),
    (
        "feature_ops",
        lambda: verify.attention(np.add, feature_map=elu1, feature_ops=-1),
        "`feature_ops`",
    ),
]


@pytest.mark.parametrize("call, message", [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS])
def test_bad_input_raises(call, message):
    with pytest.raises(InvalidArgument, match=message):
        call()


def test_public_surface():
    from kernelcheck._src.verify.attention import api as va

    assert va.__all__ == ["attention", "AttentionReport", "AttentionCase"]
    assert verify.AttentionReport is va.AttentionReport
    assert verify.attention is va.attention
    for obj in (va.attention, va.assert_attention_matches, va.AttentionReport, va.AttentionCase):
        assert obj.__doc__


def test_report_of_a_layer_that_gives_no_output_names_no_entry_or_tolerance():
    """A layer that raises has no entry to compare: the line says so, with no 'nan'."""

    def broken(Q, K, V, **kwargs):
        raise RuntimeError("boom")

    report = verify.attention(broken)
    text = str(report)
    assert not report.passed and report.where is None
    assert f"case '{report.worst_case}' has no output to compare" in text
    assert "nan" not in text and "None" not in text
    assert "fn raised RuntimeError: boom" in text
