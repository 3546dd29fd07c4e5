"""``verify.attention`` on delta-rule layers: correct ones pass, reported bugs are caught (C22-C24).

The options of the families (``beta=``, ``decay=``, ``key_decay=``,
``qk_l2norm=``, ``scale=``) select the reference; the layers are
flash-linear-attention's naive references as they are (in-layer L2
normalisation added in front, as the shipped layers do it) and a small torch
recurrence into which one reported bug at a time is planted:

* beta applied twice (the value written as ``beta^2 v``);
* the error read from the state before its decay (fla-org/flash-linear-attention#885);
* the delta rule on the wrong side, ``S + beta (k - S v) v^T`` (fla#623);
* each token decayed by the previous token's gate;
* keys not L2-normalised where the layer says it normalises them
  (huggingface/transformers#40842);
* beta clamped to [1e-3, 1] (a sigmoid's range assumed where a layer allows
  negative eigenvalues, beta in (0, 2)): caught by the stress cases alone;
* beta or the gates detached from the graph: the forward pass is right, the
  gradients of ``beta`` or of the (log) gates are 0 (``grad=True``).

Every case of these calls has non-expanding transitions (unit keys, beta in
(0.1, 1), stressed near 0 and near 2), so every tolerance is finite.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck import verify
from tests.attention.families import thirdparty as tp

torch = tp.torch


def _l2(x):
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) + 1e-6)


def _gated_delta(q, k, v, g, beta, bug=""):
    """A torch Gated DeltaNet (layout (B, T, H, D), log gates), with one bug planted, or none."""
    q, k, v, g, beta = (x.transpose(1, 2) for x in (q, k, v, g, beta))
    if bug != "no l2norm":
        q, k = _l2(q), _l2(k)
    if bug == "beta clamped":
        beta = beta.clamp(1e-3, 1.0)
    if bug == "beta detached":  # no gradient reaches beta
        beta = beta.detach()
    if bug == "gates detached":
        g = g.detach()
    q = q * q.shape[-1] ** -0.5
    alpha = g.exp()
    if bug == "previous gate":
        alpha = torch.cat([torch.ones_like(alpha[..., :1]), alpha[..., :-1]], dim=-1)
    S = q.new_zeros(q.shape[:-2] + (q.shape[-1], v.shape[-1]))
    out = []
    for t in range(q.shape[-2]):
        a, b = alpha[..., t, None, None], beta[..., t, None]
        kt, vt = k[..., t, :], v[..., t, :]
        read = (S * kt[..., :, None]).sum(-2)  # S_(t-1)^T k, before the decay
        S = S * a
        if bug == "wrong side":
            err = kt - (S @ vt[..., :, None])[..., 0]
            S = S + (b * err)[..., :, None] * vt[..., None, :]
        else:
            if bug != "pre-decay error":
                read = (S * kt[..., :, None]).sum(-2)
            value = b * vt if bug == "beta twice" else vt
            S = S + kt[..., :, None] * (b * (value - read))[..., None, :]
        out.append((S * q[..., t, :, None]).sum(-2))
    return torch.stack(out, dim=-2).transpose(1, 2)


_OPTIONS = {
    "framework": "torch", "layout": "bnhd", "batch_shape": (1, 2), "causal": True,
    "beta": lambda rng, shape: rng.uniform(0.1, 1.0, shape),
    "decay": lambda rng, shape: rng.uniform(0.5, 1.0, shape),
    "qk_l2norm": True, "scale": lambda d: d**-0.5, "log_gates": True,
    "cases": ("random", "odd length", "repeated tokens", "positive values"),
}  # fmt: skip


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_correct_gated_deltanet_passes(dtype):
    report = verify.attention(lambda *a: _gated_delta(*a), dtype=dtype, **_OPTIONS)
    assert report.passed, report.details()


@pytest.mark.parametrize("bug", ["beta twice", "pre-decay error", "wrong side",
                                 "previous gate", "no l2norm"])  # fmt: skip
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_every_planted_bug_is_caught(bug, dtype):
    report = verify.attention(lambda *a: _gated_delta(*a, bug=bug), dtype=dtype, **_OPTIONS)
    assert not report.passed, (bug, report.details())


def test_fla_naive_gated_delta_rule_passes_in_float32():
    fla = tp.fla_naive("gated_delta_rule/naive.py")

    def layer(q, k, v, g, beta):
        o, _ = fla.naive_recurrent_gated_delta_rule(_l2(q), _l2(k), v, beta, g,
                                                    scale=q.shape[-1] ** -0.5)  # fmt: skip
        return o

    report = verify.attention(layer, dtype="float32", **_OPTIONS)
    assert report.passed, report.details()


def test_fla_naive_delta_rule_chunkwise_passes_in_float64():
    fla = tp.fla_naive("delta_rule/naive.py")

    def layer(q, k, v, beta):  # layout (B, H, T, D); n a multiple of its chunk
        o, _ = fla.delta_rule_chunkwise(_l2(q), _l2(k), v, beta, chunk_size=4)
        return o

    skip = ("decay", "log_gates", "cases", "layout")
    options = {k: v for k, v in _OPTIONS.items() if k not in skip}
    report = verify.attention(layer, dtype="float64", n=16, **options,
                              cases=("random", "repeated tokens", "positive values"))  # fmt: skip
    assert report.passed, report.details()
    assert np.isfinite(report.worst_error)


def test_beta_clamped_fails_only_where_beta_is_stressed():
    report = verify.attention(lambda *a: _gated_delta(*a, bug="beta clamped"), dtype="float64",
                              **_OPTIONS)  # fmt: skip
    failed = {c.name for c in report.failures()}
    stressed = {"random, beta near 0", "random, beta near 2"}
    assert stressed <= failed, report.details()
    assert failed - stressed == {name for name in failed if name.startswith("final state")}


def test_fla_naive_recurrent_kda_passes_with_its_key_gates_stressed():
    fla = tp.fla_naive("kda/naive.py")

    def layer(q, k, v, g, beta):  # layout (B, T, H, D), log gates per key channel
        o, _ = fla.naive_recurrent_kda(_l2(q), _l2(k), v, g, beta, scale=q.shape[-1] ** -0.5)
        return o

    options = {k: v for k, v in _OPTIONS.items() if k != "decay"}
    options["key_decay"] = lambda rng, shape: rng.uniform(0.5, 1.0, shape)
    report = verify.attention(layer, dtype="float32", **options)
    assert report.passed, report.details()
    names = {c.name for c in report.cases}
    assert {"random, gates near 0", "random, gates near 1", "random, beta near 2"} <= names


@pytest.mark.parametrize("log_gates", [True, False])
def test_the_gradients_of_a_correct_layer_pass_with_gates_or_their_logs(log_gates):
    def layer(q, k, v, g, beta):
        return _gated_delta(q, k, v, g if log_gates else g.log(), beta)

    options = {**_OPTIONS, "log_gates": log_gates}
    report = verify.attention(layer, dtype="float32", grad=True, **options)
    assert report.passed, report.details()
    names = {c.name for c in report.checks}
    assert {"gradient dgates (random)", "gradient dbeta (random)"} <= names


@pytest.mark.parametrize("bug, grad", [("beta detached", "dbeta"), ("gates detached", "dgates")])
def test_a_detached_per_token_input_fails_its_gradient_alone(bug, grad):
    report = verify.attention(lambda *a: _gated_delta(*a, bug=bug), dtype="float64", grad=True,
                              **_OPTIONS)  # fmt: skip
    failed = {c.name for c in report.failures()}
    assert failed and all(name.startswith(f"gradient {grad} ") for name in failed), failed


#: the transition families' chunked forms and the verify.attention options that select them
_STATE_LAYERS = {
    "delta": ("delta_chunked", ("beta",)),
    "gated_delta": ("gated_delta_chunked", ("decay", "beta")),
    "kda": ("kda_chunked", ("key_decay", "beta")),
    "dplr": ("dplr_chunked", ("dplr_a", "dplr_b", "key_decay")),
}


def _state_layer(family: str, bug: str = ""):
    """The family's chunked form as a layer with a state; ``bug``: the handed state halved."""
    from kernelcheck import attention

    form = getattr(attention, _STATE_LAYERS[family][0])

    def layer(q, k, v, *tokens, initial_state=None):
        if bug and initial_state is not None:
            initial_state = attention.State(initial_state.S * 0.5)
        return form(q, k, v, *tokens, initial_state=initial_state, return_state=True,
                    chunk_size=16, qk_l2norm=True, scale=q.shape[-1] ** -0.5)  # fmt: skip

    return layer


def _state_options(family: str) -> dict:
    from kernelcheck._src.attention.registry import FAMILIES

    samplers = {ti.option: ti.sample for ti in FAMILIES[family].token_inputs}
    options = {name: samplers[name] for name in _STATE_LAYERS[family][1]}
    return {**options, "qk_l2norm": True, "scale": lambda d: d**-0.5, "causal": True}


@pytest.mark.parametrize("family", sorted(_STATE_LAYERS))
def test_state_true_judges_the_final_state_and_the_hand_over_of_every_transition_family(family):
    """state=True runs the family's own state form (its options, not the normaliser's) and
    hands the state over at n/2, n-2, n-1: a correct layer passes, a halved handed state fails."""
    from kernelcheck._src.attention.registry import FAMILIES

    assert {fam.name for fam in FAMILIES if fam.flags and fam.state_form} == set(_STATE_LAYERS)
    kw = dict(state=True, n=40, cases=("random", "odd length"), **_state_options(family))
    report = verify.attention(_state_layer(family), **kw)
    assert report.passed, report.details()
    names = {c.name for c in report.checks if c.passed}
    assert {"final state (random)", "state hand-over (random)"} <= names
    bug = verify.attention(_state_layer(family, bug="halved"), **kw)
    failed = {c.name for c in bug.checks if c.passed is False}
    assert "state hand-over (random)" in failed and all(c.passed for c in bug.cases)


def test_a_case_whose_transitions_expand_is_not_judged_and_says_why():
    """Keys not normalised (``|k|^2`` about 8, beta in (0.5, 1)): every transition stretches, the
    normwise model bounds nothing, and the case says so (not a float64 overflow, not a pass)."""
    from kernelcheck import attention

    def layer(q, k, v, beta):
        return attention.delta_chunked(q, k, v, beta, chunk_size=4)

    report = verify.attention(layer, beta=lambda rng, shape: rng.uniform(0.5, 1.0, shape),
                              causal=True, n=40, cases=("random",))  # fmt: skip
    random = next(c for c in report.cases if c.name == "random")
    assert random.passed is None and "no finite bound" in random.note, random.note
    assert "float64 range" not in random.note


def test_layer_chunk_is_a_chunk_length_and_a_bad_one_is_refused_by_name():
    from kernelcheck import attention
    from kernelcheck.errors import InvalidArgument

    def layer(q, k, v, beta):
        return attention.delta_chunked(q, k, v, beta, chunk_size=16, qk_l2norm=True)

    kw = dict(beta=lambda rng, shape: rng.uniform(0.1, 1.0, shape), causal=True, n=20,
              qk_l2norm=True, cases=("random",))  # fmt: skip
    assert verify.attention(layer, layer_chunk=16, **kw).passed
    for bad in (0, True, 2.5):
        with pytest.raises(InvalidArgument, match="layer_chunk"):
            verify.attention(layer, layer_chunk=bad, **kw)
