"""verify.attention on the layers users ship: PyTorch and JAX, float64 to bfloat16, fixed head
sizes, layouts, gradients, state hand-over, gated recurrences (claims C1, C14, C19, C20).

Correct layers are written the way their users write them (torch's own
scaled_dot_product_attention and MultiheadAttention, cumulative-sum and
chunked linear attention, a gated recurrence); each bug is planted in one
of them and must be caught, with a diagnosis where the issue names one.
Sizes stay small so the file runs in seconds; the n = 4096 figures are
measured by ``benchmarks/bench_verify_attention.py`` and reported in the docs.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from kernelcheck import verify
from kernelcheck.errors import InvalidArgument

torch = pytest.importorskip("torch")
F = torch.nn.functional

DTYPES = ("float64", "float32", "float16", "bfloat16")


def elu1(x):
    return torch.where(x > 0, x + 1.0, torch.exp(torch.clamp(x, max=0.0)))


def elu1_np(X):
    return np.where(X > 0, X + 1.0, np.exp(np.minimum(X, 0.0)))


def sdpa(causal=False, scale=None, mask_shift=0):
    def fn(Q, K, V):
        if mask_shift:
            n = Q.shape[-2]
            mask = torch.ones(n, n, dtype=torch.bool).tril(mask_shift)
            return F.scaled_dot_product_attention(Q, K, V, attn_mask=mask, scale=scale)
        return F.scaled_dot_product_attention(Q, K, V, is_causal=causal, scale=scale)

    return fn


def cumsum_linear(normalize=True):
    def fn(Q, K, V):
        fq, fk = elu1(Q), elu1(K)
        S = torch.einsum("...nd,...ne->...nde", fk, V).cumsum(dim=-3)
        num = torch.einsum("...nd,...nde->...ne", fq, S)
        if not normalize:
            return num
        den = (fq * fk.cumsum(dim=-2)).sum(dim=-1, keepdim=True)
        return num / den

    return fn


def chunked_linear(chunk=4, drop_last_of_chunk=False, drop_last_state=False):
    """Chunked causal linear attention with a state (S, z) handed in and out."""

    def fn(Q, K, V, initial_state=None):
        fq, fk = elu1(Q), elu1(K)
        n, D, dv = Q.shape[-2], fq.shape[-1], V.shape[-1]
        if initial_state is None:
            S = torch.zeros(Q.shape[:-2] + (D, dv), dtype=Q.dtype)
            z = torch.zeros(Q.shape[:-2] + (D,), dtype=Q.dtype)
        else:
            S, z = initial_state
        outs = []
        for c0 in range(0, n, chunk):
            q, k, v = (
                fq[..., c0 : c0 + chunk, :],
                fk[..., c0 : c0 + chunk, :],
                V[..., c0 : c0 + chunk, :],
            )
            m = torch.ones(q.shape[-2], q.shape[-2], dtype=Q.dtype).tril()
            A = (q @ k.transpose(-1, -2)) * m
            num = A @ v + q @ S
            den = A.sum(-1, keepdim=True) + q @ z[..., :, None]
            outs.append(num / den)
            kk, vv = (k[..., :-1, :], v[..., :-1, :]) if drop_last_of_chunk else (k, v)
            S = S + kk.transpose(-1, -2) @ vv
            z = z + kk.sum(-2)
        if drop_last_state:  # the state handed on forgets the last token
            S = S - fk[..., -1, :, None] * V[..., -1, None, :]
            z = z - fk[..., -1, :]
        return torch.cat(outs, -2), (S, z)

    return fn


# ---------------------------------------------------------------------------
# Correct layers pass in every dtype


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal", [False, True])
def test_torch_sdpa_passes_in_every_dtype(dtype, causal):
    report = verify.attention(sdpa(causal), framework="torch", dtype=dtype, causal=causal, n=24)
    assert report.passed, report.details()
    assert report.framework == "torch" and dtype in report.precision


@pytest.mark.parametrize("dtype", DTYPES)
def test_linear_layers_pass_in_every_dtype(dtype):
    for fn, kw in (
        (cumsum_linear(), {}),
        (chunked_linear(), {"state": True}),
    ):
        report = verify.attention(
            fn, framework="torch", dtype=dtype, causal=True, feature_map=elu1_np, n=24, **kw
        )
        assert report.passed, report.details()


def test_a_module_is_read_by_its_forward_signature():
    class Layer(torch.nn.Module):
        def forward(self, q, k, v):
            return cumsum_linear()(q, k, v)

    class Chunked(torch.nn.Module):
        def forward(self, q, k, v, chunk_size=4):
            return chunked_linear(chunk=chunk_size)(q, k, v)[0]

    kw = dict(framework="torch", causal=True, feature_map=elu1_np, cases=("random",))
    plain = verify.attention(Layer(), **kw)
    assert plain.passed, plain.details()
    assert not any(c.name.startswith("chunk") for c in plain.checks)
    chunked = verify.attention(Chunked(), **kw)
    assert chunked.passed, chunked.details()
    assert sum(c.name.startswith("chunk") for c in chunked.checks) == 3


def test_multihead_attention_with_a_fixed_embed_dim():
    d = 8
    mha = torch.nn.MultiheadAttention(d, 1, bias=False, batch_first=True).double()
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.eye(d).repeat(3, 1))
        mha.out_proj.weight.copy_(torch.eye(d))

    def fn(Q, K, V):
        with torch.no_grad():
            return mha(Q, K, V, need_weights=False)[0]

    report = verify.attention(fn, framework="torch", dtype="float64", d=d, batch_shape=(2,))
    assert report.passed, report.details()
    assert [c.name for c in report.skipped()] == ["d=1"]
    assert "fixed at d = 8" in report.skipped()[0].note


def test_fla_layout_and_unnormalised_reference():
    """(batch, n, heads, dim) in and out, plain linear attention without normaliser (C19)."""

    def fla_like(q, k, v):  # shapes (B, T, H, K); positive features exp(x)
        q, k, v = (x.transpose(1, 2) for x in (q, k, v))
        A = (torch.exp(q) @ torch.exp(k).transpose(-1, -2)).tril()
        return (A @ v).transpose(1, 2)

    report = verify.attention(
        fla_like,
        framework="torch",
        dtype="float32",
        causal=True,
        feature_map=np.exp,
        normalize=False,
        layout="bnhd",
        batch_shape=(2, 3),
        cases=("random", "positive values"),
    )
    assert report.passed, report.details()
    normalised = verify.attention(
        fla_like, framework="torch", causal=True, feature_map=np.exp,
        layout="bnhd", batch_shape=(2, 3), cases=("positive values",),
    )  # fmt: skip
    assert not normalised.passed
    assert "missing normaliser" in normalised.failures()[0].diagnosis


def test_query_and_key_maps_may_differ():
    def fn(Q, K, V):
        fq, fk = elu1(Q), torch.exp(K)
        A = fq @ fk.transpose(-1, -2)
        return (A @ V) / A.sum(-1, keepdim=True)

    ok = verify.attention(fn, framework="torch", feature_map=(elu1_np, np.exp), cases=("random",))
    assert ok.passed, ok.details()
    wrong = verify.attention(fn, framework="torch", feature_map=elu1_np, cases=("random",))
    assert not wrong.passed


def test_a_scale_that_is_a_function_of_d():
    fn = sdpa(scale=None)
    assert verify.attention(fn, framework="torch", scale=lambda d: 1 / math.sqrt(d)).passed
    assert not verify.attention(fn, framework="torch", scale=lambda d: 1 / d).passed


def test_a_declared_stabilizer_is_the_only_allowance():
    def eps_layer(Q, K, V):
        fq, fk = elu1(Q), elu1(K)
        A = fq @ fk.transpose(-1, -2)
        return (A @ V) / (A.sum(-1, keepdim=True) + 1e-6)

    plain = verify.attention(eps_layer, framework="torch", dtype="float64", feature_map=elu1_np)
    assert not plain.passed  # in float64 an eps of 1e-6 is far beyond rounding
    declared = verify.attention(
        eps_layer, framework="torch", dtype="float64", feature_map=elu1_np, stabilizer=1e-6
    )
    assert declared.passed, declared.details()
    assert any("stabilizer" in n for n in declared.notes)
    too_small = verify.attention(
        eps_layer, framework="torch", dtype="float64", feature_map=elu1_np, stabilizer=1e-9
    )
    assert not too_small.passed


def test_a_float32_layer_returning_float64_is_judged_as_declared():
    def upcast(Q, K, V):
        return F.scaled_dot_product_attention(Q, K, V).double()

    report = verify.attention(upcast, framework="torch", dtype="float32")
    assert report.passed, report.details()
    assert any("judged in float32" in c.note for c in report.cases)


# ---------------------------------------------------------------------------
# Bugs are caught, and named


@pytest.mark.parametrize("dtype", DTYPES)
def test_causal_mask_shifted_by_one_is_caught_and_named(dtype):
    report = verify.attention(sdpa(mask_shift=1), framework="torch", dtype=dtype, causal=True)
    assert not report.passed
    assert "shifted by +1" in report.failures()[0].diagnosis
    leak = next(c for c in report.checks if c.name == "causality")
    assert not leak.passed and "depends on token t + 1" in leak.note


def test_bidirectional_layer_checked_as_causal_is_named():
    report = verify.attention(sdpa(False), framework="torch", causal=True, cases=("random",))
    assert not report.passed
    assert "bidirectional" in report.failures()[0].diagnosis


@pytest.mark.parametrize("dtype", DTYPES)
def test_scale_one_over_d_is_named(dtype):
    report = verify.attention(
        sdpa(scale=1 / 8), framework="torch", dtype=dtype, d=8, cases=("random", "positive values")
    )
    assert not report.passed
    assert "1/d" in " ".join(c.diagnosis for c in report.failures())


@pytest.mark.parametrize("dtype", DTYPES)
def test_missing_normaliser_and_dropped_last_key_are_caught(dtype):
    missing = verify.attention(
        cumsum_linear(normalize=False), framework="torch", dtype=dtype, causal=True,
        feature_map=elu1_np,
    )  # fmt: skip
    assert not missing.passed

    def drop_last_key(Q, K, V):
        return F.scaled_dot_product_attention(Q, K[..., :-1, :], V[..., :-1, :])

    assert not verify.attention(drop_last_key, framework="torch", dtype=dtype).passed


@pytest.mark.parametrize("dtype", DTYPES)
def test_chunk_state_missing_each_chunks_last_token_is_caught(dtype):
    report = verify.attention(
        chunked_linear(drop_last_of_chunk=True), framework="torch", dtype=dtype, causal=True,
        feature_map=elu1_np, state=True,
    )  # fmt: skip
    assert not report.passed


@pytest.mark.parametrize("dtype", DTYPES)
def test_handed_over_state_missing_the_last_token_is_caught(dtype):
    report = verify.attention(
        chunked_linear(drop_last_state=True), framework="torch", dtype=dtype, causal=True,
        feature_map=elu1_np, state=True, cases=("random",),
    )  # fmt: skip
    assert report.cases[0].passed  # the outputs are right ...
    failed = {c.name.split(" (")[0] for c in report.failures()}
    assert {"final state", "state hand-over"} <= failed  # ... the state is not


def test_relative_errors_from_n_over_2_are_caught_with_the_probabilistic_model():
    """1e-4 in float32 and 3e-2 in bfloat16, on the positive-values case (n = 512 here)."""

    def off(fn, rel):
        def bug(Q, K, V):
            out = fn(Q, K, V)
            s = torch.ones(out.shape[-2], 1, dtype=out.dtype)
            s[out.shape[-2] // 2 :] = 1 + rel
            return out * s

        return bug

    for dtype, rel in (("float32", 1e-4), ("bfloat16", 3e-2)):
        kw = dict(framework="torch", dtype=dtype, causal=True, n=512, cases=("positive values",),
                  check_causality=False, error_model="probabilistic")  # fmt: skip
        assert verify.attention(sdpa(True), **kw).passed
        assert not verify.attention(off(sdpa(True), rel), **kw).passed


@pytest.mark.parametrize("dtype", DTYPES)
def test_backward_bugs_are_caught(dtype):
    def custom_backward(causal_in_backward: bool, scale_dq: bool):
        """A causal forward whose hand-written backward may drop the mask or scale dQ."""

        class Attention(torch.autograd.Function):
            @staticmethod
            def forward(ctx, Q, K, V):
                ctx.save_for_backward(Q, K, V)
                return F.scaled_dot_product_attention(Q, K, V, is_causal=True)

            @staticmethod
            def backward(ctx, G):
                Q, K, V = ctx.saved_tensors
                with torch.enable_grad():
                    q, k, v = (x.detach().requires_grad_() for x in (Q, K, V))
                    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal_in_backward)
                    dq, dk, dv = torch.autograd.grad(out, (q, k, v), G)
                return (dq * math.sqrt(Q.shape[-1]) if scale_dq else dq), dk, dv

        return Attention.apply

    ignores_mask_in_backward = custom_backward(False, scale_dq=False)
    scales_dq = custom_backward(True, scale_dq=True)

    good = verify.attention(sdpa(True), framework="torch", dtype=dtype, causal=True, grad=True)
    assert good.passed, good.details()
    for bug in (ignores_mask_in_backward, scales_dq):
        report = verify.attention(bug, framework="torch", dtype=dtype, causal=True, grad=True)
        assert report.cases[0].passed  # the forward is right
        assert any(c.name.startswith("gradient") for c in report.failures()), report.details()


# ---------------------------------------------------------------------------
# Gated recurrences (C20)


def gated_layer(bug=None):
    """Simple-GLA style: per-token gates g (B, H, n), S_t = g_t S_(t-1) + k_t v_t^T."""

    def fn(Q, K, V, g):
        n = Q.shape[-2]
        S = torch.zeros(Q.shape[:-2] + (Q.shape[-1], V.shape[-1]), dtype=Q.dtype)
        outs = []
        for t in range(n):
            gt = g[..., t, None, None]
            if bug == "previous gate":
                gt = g[..., t - 1, None, None] if t else torch.ones_like(gt)
            kv = K[..., t, :, None] * V[..., t, None, :]
            S = gt * (S + kv) if bug == "after update" else gt * S + kv
            outs.append((Q[..., t, None, :] @ S)[..., 0, :])
        return torch.stack(outs, -2)

    return fn


def _gates(rng, shape):
    return rng.uniform(0.5, 1.0, size=shape)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_gated_layer_passes_and_gate_bugs_are_named(dtype):
    kw = dict(framework="torch", dtype=dtype, causal=True, feature_map=lambda X: X,
              normalize=False, decay=_gates, cases=("random", "positive values"))  # fmt: skip
    assert verify.attention(gated_layer(), **kw).passed
    after = verify.attention(gated_layer("after update"), **kw)
    assert not after.passed and "one decay factor too many" in after.failures()[0].diagnosis
    previous = verify.attention(gated_layer("previous gate"), **kw)
    assert not previous.passed and "previous token's gate" in previous.failures()[0].diagnosis


def test_retention_with_one_decay_per_head():
    gamma = np.array([0.9, 0.5])

    def retention(Q, K, V):
        n = Q.shape[-2]
        i = torch.arange(n)
        expo = (i[:, None] - i[None, :]).clamp(min=0).to(Q.dtype)
        D = torch.tensor(gamma, dtype=Q.dtype)[:, None, None] ** expo * (i[:, None] >= i[None, :])
        return ((Q @ K.transpose(-1, -2)) * D) @ V

    report = verify.attention(
        retention, framework="torch", causal=True, feature_map=lambda X: X, normalize=False,
        decay=gamma, batch_shape=(2,),
    )  # fmt: skip
    assert report.passed, report.details()


# ---------------------------------------------------------------------------
# JAX


def test_jax_layers_pass_and_bugs_fail():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def softmax_attn(Q, K, V):  # jax's layout is (batch, n, heads, dim)
        q, k, v = (x[None, :, None, :] for x in (Q, K, V))
        return jax.nn.dot_product_attention(q, k, v, is_causal=True)[0, :, 0, :]

    def cumsum(Q, K, V):
        fq, fk = jax.nn.elu(Q) + 1, jax.nn.elu(K) + 1
        S = jnp.cumsum(fk[:, :, None] * V[:, None, :], axis=0)
        return jnp.einsum("nd,nde->ne", fq, S) / (fq * jnp.cumsum(fk, 0)).sum(-1, keepdims=True)

    def elu(X):
        return np.where(X > 0, X + 1.0, np.expm1(np.minimum(X, 0.0)) + 1.0)

    for dtype in ("float32", "bfloat16", "float16"):
        ok = verify.attention(softmax_attn, framework="jax", dtype=dtype, causal=True, grad=True,
                              cases=("random", "positive values"))  # fmt: skip
        assert ok.passed, ok.details()
        lin = verify.attention(cumsum, framework="jax", dtype=dtype, causal=True, feature_map=elu,
                               cases=("random", "positive values"))  # fmt: skip
        assert lin.passed, lin.details()
    bug = verify.attention(lambda Q, K, V: cumsum(Q, K, V) * 1.01, framework="jax",
                           causal=True, feature_map=elu)  # fmt: skip
    assert not bug.passed


# ---------------------------------------------------------------------------
# Bad input: one clear InvalidArgument each


BAD = [
    ("framework", dict(framework="tensorflow"), r"^`framework` must be one of 'numpy', 'torch'"),
    ("dtype", dict(framework="torch", dtype="float8"), r"^`dtype` must be one of float64"),
    ("device", dict(framework="torch", device="cuda:7"), r"^`device` 'cuda:7' is not a usable"),
    ("jax float64", dict(framework="jax", dtype="float64"), r"needs 64-bit JAX"),
    ("state softmax", dict(framework="torch", state=True, causal=True), r"^`state=True` checks"),
    ("decay no map", dict(decay=0.9, causal=True), r"^`decay` needs `feature_map`"),
    ("decay bidir", dict(decay=0.9, feature_map=elu1_np), r"^`decay` applies to causal"),
    ("decay range", dict(decay=1.5, feature_map=elu1_np, causal=True), r"^`decay` must lie in"),
    ("layout", dict(layout="bhnd"), r"^`layout` must be one of"),
    ("bnhd batch", dict(layout="bnhd"), r"^layout='bnhd' needs batch_shape=\(batch, heads\)"),
    ("error model", dict(error_model="average"), r"^`error_model` must be one of"),
    ("cases", dict(cases=("huge",)), r"^`cases` must be one of"),
    ("stabilizer softmax", dict(stabilizer=1e-6), r"^`stabilizer` is an eps"),
    ("normalize softmax", dict(normalize=False), r"^`normalize=False` applies to linear"),
    ("inputs", dict(inputs=(np.ones((3, 2)), np.ones((3, 2)))), r"^`inputs` must be a tuple"),
]


@pytest.mark.parametrize("kw, message", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_options_are_refused_up_front(kw, message):
    calls = []
    with pytest.raises(InvalidArgument, match=message):
        verify.attention(lambda *a, **k: calls.append(a), **kw)
    assert not calls  # before any work


def test_a_layer_without_a_state_under_state_true_is_refused():
    with pytest.raises(InvalidArgument, match=r"takes no `initial_state`"):
        verify.attention(cumsum_linear(), framework="torch", causal=True, feature_map=elu1_np,
                         state=True)  # fmt: skip

    def no_state(Q, K, V, initial_state=None):
        return cumsum_linear()(Q, K, V)

    with pytest.raises(InvalidArgument, match=r"must return \(out, state\)"):
        verify.attention(no_state, framework="torch", causal=True, feature_map=elu1_np,
                         state=True)  # fmt: skip


def test_wrong_framework_or_shape_fails_its_case_with_a_message():
    numpy_out = verify.attention(lambda Q, K, V: np.zeros(V.shape), framework="torch")
    assert not numpy_out.passed and "must return a torch array" in numpy_out.cases[0].note
    wrong_shape = verify.attention(lambda Q, K, V: V[..., :1, :], framework="torch")
    assert not wrong_shape.passed and "expected" in wrong_shape.cases[0].note


# ---------------------------------------------------------------------------
# Hypothesis drives the verifier


from hypothesis import assume, given, settings  # noqa: E402

from kernelcheck.strategies import attention_inputs  # noqa: E402


@settings(max_examples=15, deadline=None)
@given(attention_inputs(max_n=12, dtypes=("float64", "float32", "bfloat16")))
def test_sdpa_passes_on_drawn_inputs(x):
    report = verify.attention(
        sdpa(x.causal), framework="torch", inputs=(x.Q, x.K, x.V), causal=x.causal, dtype=x.dtype
    )
    assert report.passed, report.details()


@settings(max_examples=10, deadline=None)
@given(attention_inputs(min_n=3, max_n=12, causal=True, positive_values=True, max_norm=1.0))
def test_a_shifted_mask_fails_on_drawn_inputs(x):
    # a shifted mask is invisible where every value row is the same (a weighted mean of
    # equal rows): the first two rows must differ for token 0 to see the leaked one
    assume(np.abs(x.V[..., 1, :] - x.V[..., 0, :]).max() > 1e-3)
    report = verify.attention(
        sdpa(mask_shift=1), framework="torch", inputs=(x.Q, x.K, x.V), causal=True,
        dtype=x.dtype, check_causality=False,
    )  # fmt: skip
    assert not report.passed


def test_attention_inputs_refuses_bad_bounds():
    with pytest.raises(InvalidArgument, match="min_n=5 is larger than max_n=2"):
        attention_inputs(min_n=5, max_n=2)
    with pytest.raises(InvalidArgument, match="`dtypes` must be one of"):
        attention_inputs(dtypes=("float8",))
