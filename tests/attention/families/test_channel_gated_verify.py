"""flash-linear-attention's GLA and RWKV-6 references through ``verify.attention`` (claim C21).

``verify.attention(fn, key_decay=..., value_decay=..., bonus=...)`` selects the
per-channel gated family (identity feature map by default, unnormalised).
fla's references compute in float32 whatever their input, so the float64
call declares ``accumulate="float32"``.  RWKV-6's reference takes its bonus
``u`` as an argument: the layer below binds one per head, and the call
declares it with ``bonus=`` (a constant of the layer is not handed to it).
Its state is key-major ``(B, H, K, V)``, like the reference's.

GLA (``naive_recurrent_gla``, the operator HGRN-2's layer calls with keys
``1 - f_t``) has no value gates and no bonus: the call gives ``key_decay``
alone, which ``verify.attention`` does not take yet (its per-case inputs
assume every per-token input of the family is given): marked as an expected
KeyError until it does, so the test fails the day it passes.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck import verify
from tests.fla_naive import load

torch = pytest.importorskip("torch")
pytest.importorskip("einops")

H, D = 2, 8
U = np.random.default_rng(21).normal(size=(H, D)).astype(np.float32).astype(np.float64)


def _gates(rng, shape):
    return rng.uniform(0.5, 1.0, size=shape)


def _rwkv6(bug=None):
    fla = load("rwkv6", "recurrent_naive.py")

    def layer(q, k, v, w, initial_state=None, output_final_state=True):
        u = torch.tensor(U).to(q.dtype)
        if bug == "bonus dropped":
            u = 0 * u
        if bug == "late gates":  # step t decays by the log gates of token t - 1
            w = torch.cat([torch.zeros_like(w[:, :, :1]), w[:, :, :-1]], dim=2)
        return fla.naive_recurrent_rwkv6(
            q, k, v, w, u, scale=1.0, initial_state=initial_state,
            output_final_state=output_final_state,
        )  # fmt: skip

    return layer


def _rwkv6_options(**extra):
    return dict(
        framework="torch", causal=True, batch_shape=(2, H), d=D, key_decay=_gates,
        value_decay=np.ones(D), bonus=U, log_gates=True, **extra,
    )  # fmt: skip


def test_fla_rwkv6_passes_in_float32_outputs_state_and_gradients():
    report = verify.attention(_rwkv6(), **_rwkv6_options(dtype="float32", state=True, grad=True))
    assert report.passed, report.details()
    names = {c.name.split(" (")[0] for c in report.checks}
    assert {"final state", "state hand-over", "gradient dQ", "gradient dK", "gradient dV"} <= names
    assert "gradient dlog key_gates" in names  # the log gates handed to the layer


def test_fla_rwkv6_passes_in_float64_accumulating_in_float32():
    report = verify.attention(_rwkv6(), **_rwkv6_options(dtype="float64", accumulate="float32"))
    assert report.passed, report.details()


@pytest.mark.parametrize(
    "bug, shape",
    [("bonus dropped", "the bonus dropped"), ("late gates", "the previous token's gates")],
)
def test_fla_rwkv6_with_a_planted_bug_fails_and_is_named(bug, shape):
    report = verify.attention(_rwkv6(bug), **_rwkv6_options(dtype="float32"))
    assert not report.passed
    assert any(shape in c.diagnosis for c in report.cases if c.passed is False)


@pytest.mark.parametrize("dtype, accumulate", [("float32", None), ("float64", "float32")])
def test_fla_gla_passes_with_key_gates_alone(dtype, accumulate):
    fla = load("gla")
    report = verify.attention(
        fla.naive_recurrent_gla, framework="torch", dtype=dtype, accumulate=accumulate,
        causal=True, layout="bnhd", batch_shape=(2, H), d=D,
        feature_map=(lambda X: X * X.shape[-1] ** -0.5, lambda X: X), key_decay=_gates,
        log_gates=True,
    )  # fmt: skip
    assert report.passed, report.details()


def _chunked_gla(partial_bug: bool):
    """GLA in chunks of 64 with a state; the bug decays a partial last chunk as a full one."""
    from kernelcheck.attention import State, channel_gated_chunked

    def layer(Q, K, V, a, initial_state=None):
        out, st = channel_gated_chunked(Q, K, V, a, chunk_size=64, initial_state=initial_state,
                                        return_state=True)  # fmt: skip
        pad = -Q.shape[-2] % 64
        if partial_bug and pad:
            st = State(a[..., -1, :, None] ** pad * st.S, None)
        return out, st

    return layer


def test_a_partial_last_chunk_decayed_as_a_full_one_is_named_on_the_final_state():
    kw = dict(causal=True, key_decay=_gates, state=True, cases=("random", "across blocks"))
    assert verify.attention(_chunked_gla(False), **kw).passed
    report = verify.attention(_chunked_gla(True), **kw)
    failed = [c for c in report.failures() if c.name.startswith("final state")]
    assert failed and all("decayed as a full one of 64 tokens" in c.diagnosis for c in failed)
