"""verify.attention's options against bad values: two tables, each row run over both
public calls (:func:`kernelcheck.verify.attention` and its pytest twin).

* ``OPTIONS_BAD``: one bad option per row; the contract is an
  :class:`InvalidArgument` whose message opens with the option's name (for a
  size: the memory it would need), raised before any case is run (a callable's
  bad result: when it is first called).
* ``VERDICTS``: options and layers that are not wrong but unusual (a state
  without its normaliser, inputs that flush to zero, a decay given in float32,
  ...); the contract is a report whose text says what happened.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from kernelcheck import attention, testing, verify
from kernelcheck.errors import Inconclusive, InvalidArgument

RNG = np.random.default_rng(17)
Q, K, V = RNG.normal(size=(3, 4, 2))


def _softmax(q, k, v):
    return attention.softmax(q, k, v)


def _gated(q, k, v):
    return attention.gated_parallel(np.exp(q), np.exp(k), v, 0.9)


def _att(**options):
    return lambda call: call(_softmax, **options)


def _gated_att(decay, **options):
    return lambda call: call(
        _gated, feature_map=np.exp, decay=decay, causal=True, normalize=False, **options
    )


def _channel_att(**options):
    """A per-channel gated layer (GLA: key gates), its gates its own constant per head."""
    layer = lambda q, k, v: attention.channel_gated_chunked(q, k, v, None, None, None)  # noqa: E731
    return lambda call: call(layer, causal=True, **options)


def _unnormalised(q, k, v):
    return attention.parallel(np.exp(q), np.exp(k), v, normalize=False)


def _two_gradients(Q, K, V, G):
    dQ, dK, dV = attention.softmax_vjp(Q, K, V, G)
    return dQ, dK


def _state_att(z=True, **options):
    """A call checking the state of :func:`_state_layer` (causal, exp features)."""
    return lambda call: call(
        _state_layer(z), feature_map=np.exp, causal=True, state=True, **options
    )


def _state_layer(z=True):
    """Chunked linear attention with exp features and its state, as kernelcheck computes it."""

    def fn(q, k, v, initial_state=None):
        if initial_state is not None and initial_state[1] is None:  # handed back without z
            raise ValueError("the state holds no normaliser")
        handed = None if initial_state is None else attention.State(*initial_state)
        out, state = attention.chunked(
            np.exp(q), np.exp(k), v, chunk_size=3, initial_state=handed, return_state=True
        )
        return out, (state.S, state.z if z else None)

    return fn


#: the public calls every row runs through
PUBLIC = {
    "verify.attention": verify.attention,
    "assert_attention_matches": testing.assert_attention_matches,
}


#: id -> (call, regex the message opens with)
OPTIONS_BAD = {
    "grad-string": (_att(grad="yes"), r"^`grad` must be True or False, got str 'yes'"),
    "grad-int": (_att(grad=1), r"^`grad` must be True or False"),
    "state-string": (_att(state="yes"), r"^`state` must be True or False"),
    "check_causality-int": (_att(check_causality=0), r"^`check_causality` must be True or False"),
    "log_gates-string": (_att(log_gates="no"), r"^`log_gates` must be True or False"),
    "progress-not-callable": (_att(progress=True), r"^`progress` must be callable"),
    "key_decay-width": (
        _channel_att(key_decay=np.full(3, 0.9), batch_shape=(2,)),
        r"^`key_decay` of shape \(3,\) holds 3 values per head on its last axis, one per "
        r"channel of width D, but case 'random' has D = 8",
    ),
    "key_decay-per-channel-without-d": (
        _channel_att(key_decay=np.full(8, 0.9)),
        r"^`key_decay` of shape \(8,\) .* but case 'd=1' has D = 1: .* pass d= to fix",
    ),
    "key_decay-above-one": (_channel_att(key_decay=1.5), r"^`key_decay` must lie in \[0, 1\]"),
    "key_decay-negative": (_channel_att(key_decay=-0.1), r"^`key_decay` must lie in \[0, 1\]"),
    "normalize-int": (_att(normalize=1), r"^`normalize` must be True or False"),
    "framework-unknown": (_att(framework="tensorflow"), r"^`framework` must be one of 'numpy'"),
    "framework-none": (_att(framework=None), r"^`framework` must be one of"),
    "layout-unknown": (_att(layout="nd"), r"^`layout` must be one of '\.\.\.nd', 'bnhd'"),
    "error_model-unknown": (_att(error_model="best"), r"^`error_model` must be one of"),
    "failure_probability-zero": (
        _att(failure_probability=0),
        r"^`failure_probability` must lie strictly between 0 and 1",
    ),
    "failure_probability-nan": (
        _att(failure_probability=math.nan),
        r"^`failure_probability` must be finite",
    ),
    "failure_probability-string": (
        _att(failure_probability="1e-9"),
        r"^`failure_probability` must be a real number",
    ),
    "storage_ops-zero": (_att(storage_ops=0), r"^`storage_ops` must be >= 1, got 0"),
    "storage_ops-float": (_att(storage_ops=1.5), r"^`storage_ops` must be an integer"),
    "stabilizer-negative": (_att(stabilizer=-1.0), r"^`stabilizer` must be >= 0"),
    "stabilizer-nan": (_att(stabilizer=math.nan), r"^`stabilizer` must be finite"),
    "stabilizer-inf": (_att(stabilizer=math.inf), r"^`stabilizer` must be finite"),
    "stabilizer-softmax": (_att(stabilizer=0.0), r"^`stabilizer` is an eps added"),
    "decay-without-feature_map": (_att(decay=0.9), r"^`decay` needs `feature_map`"),
    "decay-nan": (_gated_att(math.nan), r"^`decay` must be finite"),
    "decay-inf": (_gated_att(math.inf), r"^`decay` must be finite"),
    "decay-above-one": (_gated_att(2.0), r"^`decay` must lie in \(0, 1\]"),
    "decay-zero": (_gated_att(0.0), r"^`decay` must lie in \(0, 1\]"),
    "decay-negative": (_gated_att(-0.5), r"^`decay` must lie in \(0, 1\]"),
    "decay-string": (_gated_att("x"), r"^`decay` must be a numeric array"),
    "read_state-int": (_att(read_state=3), r"^`read_state` must be callable"),
    "vjp-string": (_att(vjp="x"), r"^`vjp` must be callable"),
    "fn_kwargs-list": (_att(fn_kwargs=[1]), r"^`fn_kwargs` must be a dict of keyword arguments"),
    "fn_kwargs-string": (_att(fn_kwargs="x"), r"^`fn_kwargs` must be a dict"),
    "cases-unknown": (_att(cases=["nope"]), r"^`cases` must be one of 'random'"),
    "cases-empty": (_att(cases=[]), r"^`cases` must name at least one of"),
    "cases-string": (_att(cases="x"), r"^`cases` must be one of"),
    "device-numpy": (_att(device=3), r"^`device` 3 does not apply to NumPy arrays"),
    "inputs-int": (_att(inputs=3), r"^`inputs` must be a tuple \(Q, K, V\) of three arrays"),
    "inputs-two": (_att(inputs=(Q, K)), r"^`inputs` must be a tuple \(Q, K, V\)"),
    "inputs-V-rows": (_att(inputs=(Q, K, V[:2])), r"^`inputs` V must have the leading shape"),
    "inputs-nan": (_att(inputs=(Q, K, V * np.nan)), r"^`inputs\[2\] \(V\)` must be finite"),
    "inputs-complex": (_att(inputs=(Q + 0j, K, V)), r"^`inputs\[0\] \(Q\)` must be real"),
}

OPTIONS_BAD.update(
    {
        "accumulate-unknown": (_att(accumulate="float8"), r"^`accumulate`"),
        "fn_kwargs-non-string-keys": (_att(fn_kwargs={1: 2}), r"^`fn_kwargs` must be a dict"),
        "cases-int": (_att(cases=3), r"^`cases` must be a case name or a list"),
        "decay-wrong-shape": (_gated_att(np.ones(7)), r"^`decay` as an array is one decay"),
        "decay-bool": (_gated_att(True), r"^`decay` must be a number in \(0, 1\]"),
        # sizes: refused before any case is drawn, with the memory they would need
        "n-huge": (
            _att(n=2**40),
            r"^the cases of verify.attention \(n = 1099511627776.* would need",
        ),
        "batch_shape-huge": (
            _att(batch_shape=(10**6, 10**6)),
            r"^the cases of verify.attention .*batch_shape = \(1000000, 1000000\).* would need",
        ),
    }
)


OPTIONS_BAD.update(
    {
        "stabilizer-unnormalised": (
            lambda call: call(_unnormalised, feature_map=np.exp, normalize=False, stabilizer=1e-6),
            r"^`stabilizer`=1e-06 is an eps added to a normaliser, but the reference, .* divides "
            r"by none \(normalize=False\)",
        ),
        "batch_shape-63-axes": (
            _att(batch_shape=(1,) * 63),
            r"^`batch_shape` may hold at most \d+ leading \(batch, head\) axes, got 63 axes",
        ),
        # the attention forms' per-head gates (H, 1): refused whatever B is, B = H included
        "decay-(H, 1)-B-equals-H": (
            _gated_att(np.array([[0.9], [0.5]]), batch_shape=(2, 2)),
            r"^`decay` of shape \(2, 1\) ends in an axis of 1 where batch_shape \(2, 2\) has 2 "
            r"heads: .* write one decay per head as shape \(2,\)",
        ),
        "decay-(H, 1)-B-other": (
            _gated_att(np.array([[0.9], [0.5]]), batch_shape=(3, 2)),
            r"^`decay` of shape \(2, 1\) ends in an axis of 1 where batch_shape \(3, 2\)",
        ),
        "vjp-two-arrays": (
            _att(grad=True, vjp=_two_gradients, cases="random"),
            r"^`vjp\(Q, K, V, G\)` must return three arrays \(dQ, dK, dV\), got a tuple of 2",
        ),
        "vjp-without-grad": (
            _att(vjp=_two_gradients),
            r"^`vjp` is used by the gradient check: pass grad=True",
        ),
        "log_gates-softmax": (_att(log_gates=True), r"^`log_gates=True` hands fn the logarithms"),
        "log_gates-constant-decay": (
            _gated_att(0.9, log_gates=True),
            r"^`log_gates=True` .* but fn is handed none: a constant `decay` is the layer's own",
        ),
        "fn_kwargs-initial_state": (
            _state_att(fn_kwargs={"initial_state": None}),
            r"^`fn_kwargs` holds initial_state, which state=True passes to fn itself",
        ),
        "read_state-without-state": (
            _att(read_state=lambda s: s),
            r"^`read_state` reads the layer's state for the checks of state=True",
        ),
        "batch_shape-not-the-inputs": (
            _gated_att(np.array([0.9, 0.5]), batch_shape=(2,), inputs=(Q, K, V)),
            r"^`batch_shape` \(2,\) differs from the batch \(\) of `inputs`",
        ),
        "offsets-inputs-not-arrays": (
            _att(inputs=3, offsets=[0, 2]),
            r"^`inputs` must be a tuple \(Q, K, V\) of three arrays, got int 3",
        ),
        "accumulate-tf32": (
            _att(accumulate="tf32"),
            r"^`accumulate` tf32 is the operand format of matrix products",
        ),
    }
)

#: rows that need a framework: (module, options of the softmax row)
FRAMEWORK_BAD = {
    "device-meta": (
        "torch",
        dict(framework="torch", device="meta"),
        r"^`device` 'meta' is not a usable torch device here",
    ),
    "vjp-torch": (
        "torch",
        dict(framework="torch", grad=True, vjp=_two_gradients),
        r"^`vjp` is a NumPy layer's backward pass; with framework='torch'",
    ),
    "device-jax-object": (
        "jax",
        dict(framework="jax", device=object()),
        r"^`device` must be a jax platform name .* or a jax.Device, got object",
    ),
}


@pytest.mark.parametrize("public", sorted(PUBLIC))
@pytest.mark.parametrize("name", sorted(OPTIONS_BAD))
def test_each_bad_option_of_verify_attention_is_refused_by_name(name, public):
    make, message = OPTIONS_BAD[name]
    with pytest.raises(InvalidArgument, match=message):
        make(PUBLIC[public])


@pytest.mark.parametrize("public", sorted(PUBLIC))
@pytest.mark.parametrize("name", sorted(FRAMEWORK_BAD))
def test_each_bad_framework_option_is_refused_by_name(name, public):
    module, options, message = FRAMEWORK_BAD[name]
    pytest.importorskip(module)
    with pytest.raises(InvalidArgument, match=message):
        PUBLIC[public](_softmax, **options)


def _report_text(make, call) -> str:
    """The report's line and details; the pytest twin's message holds them when it raises."""
    try:
        report = make(call)
    except (AssertionError, Inconclusive) as exc:  # the twin's report that is not verified
        return str(exc)
    return f"{report}\n{report.details()}"


def _bnhd_softmax(q, k, v):
    """Softmax attention on (batch, tokens, heads, dim) arrays."""
    out = attention.softmax(*(np.swapaxes(x, -3, -2) for x in (q, k, v)))
    return np.swapaxes(np.asarray(out), -3, -2)


def _masked(q, k, v):
    out = np.asarray(attention.softmax(q, k, v))
    return np.ma.masked_array(out, mask=np.ones(out.shape, dtype=bool))


def _refusing(q, k, v):
    """A layer built on kernelcheck whose form refuses its argument (InvalidArgument)."""
    return attention.softmax(q, k, v, scale=-1.0)


#: id -> (call, regex the report's text must match): each says what happened
VERDICTS = {
    "state-without-z": (
        _state_att(z=False),
        r"\nverified: final state \(random\) .*the layer's state holds no normaliser z "
        r".*: S compared alone",
    ),
    "read_state-NaN": (
        _state_att(read_state=lambda s: (s[0] * np.nan, s[1])),
        r"\nrefuted: final state \(random\) .*the layer's state S holds nan at \(0, 0\) \(\d+ of ",
    ),
    "accumulate-bfloat16-n-64": (
        _att(accumulate="bfloat16", n=64),
        r"\ninconclusive: odd length: skipped \(no worst-case tolerance over "
        rf"{2 * 64 + 5} tokens with sums in bfloat16 \(accumulate='bfloat16'\)"
        r".*a smaller `n`.*a wider `accumulate` \(float32\)",
    ),
    "checks-without-their-case": (
        _state_att(accumulate="bfloat16", n=64),
        r"\ninconclusive: causality: skipped \(it runs on case 'random', which was not judged\)\n"
        r"inconclusive: state hand-over: skipped \(it runs on case 'random'",
    ),
    "decay-float32": (
        _gated_att(np.float32(0.9)),
        r"diagnosis: the output is the reference with decay = 0\.9, within rounding: `decay` "
        r"was given in float32, which holds 0\.899999976",
    ),
    "inputs-flush-to-zero": (
        _att(inputs=(Q, K, V * 1e-300), dtype="float32"),
        rf"\nverified: user inputs \(.*\): .*{V.size} of {V.size} entries of V are nonzero but "
        "flush to 0 in float32",
    ),
    "inputs-beyond-the-bound": (
        _att(inputs=(Q * 1e300, K, V)),
        r"^(?!verified)(.|\n)*\ninconclusive: user inputs: skipped \(the error bound is not "
        "finite at",
    ),
    "fn-raises-InvalidArgument": (
        lambda call: call(_refusing, cases="random"),
        r"^refuted:(.|\n)*fn raised InvalidArgument: `scale`",
    ),
    "state-n-4": (
        _state_att(n=4),
        r"\nverified: state hand-over \(random\) \(.*\):",
    ),
    "inputs-bnhd-without-batch_shape": (
        lambda call: call(
            _bnhd_softmax,
            layout="bnhd",
            inputs=(Q[None, :, None], K[None, :, None], V[None, :, None]),
        ),
        r"^verified",
    ),
    "failure_probability-subnormal": (
        _att(error_model="probabilistic", failure_probability=5e-324),
        r"^verified",
    ),
    "fn-returns-masked": (
        lambda call: call(_masked, cases="random"),
        r"^refuted:(.|\n)*`fn` returned a masked array as its output, with \d+ masked entries",
    ),
}


@pytest.mark.parametrize("public", sorted(PUBLIC))
@pytest.mark.parametrize("name", sorted(VERDICTS))
def test_an_unusual_call_ends_in_a_report_that_says_what_happened(name, public):
    make, pattern = VERDICTS[name]
    assert re.search(pattern, _report_text(make, PUBLIC[public])), name


def _torch_gated(q, k, v):
    """Gated linear attention with decay 0.9 in float64, as a torch layer."""
    import torch

    out = np.asarray(_gated(q.double().numpy(), k.double().numpy(), v.double().numpy()))
    return torch.tensor(out, dtype=q.dtype)


def _jax_softmax(q, k, v):
    import jax
    import jax.numpy as jnp

    s = (q @ jnp.swapaxes(k, -1, -2)).astype(jnp.float32) / np.sqrt(q.shape[-1]).astype(np.float32)
    return (jax.nn.softmax(s, axis=-1) @ v.astype(jnp.float32)).astype(q.dtype)


def _framework_verdicts():
    """id -> (module, call, regex): rows whose values are framework arrays, made when needed."""

    def gated_torch(decay, **options):
        return lambda call: call(
            _torch_gated, framework="torch", dtype="float64", feature_map=np.exp, decay=decay(),
            causal=True, normalize=False, cases="random", **options,
        )  # fmt: skip

    def bf16(x):
        import jax.numpy as jnp

        return jnp.asarray(x, dtype=jnp.bfloat16)

    def tensor(value, dtype):
        import torch

        return torch.tensor(value, dtype=getattr(torch, dtype))

    return {
        "decay-torch-float32": (
            "torch",
            gated_torch(lambda: tensor(0.9, "float32")),
            r"diagnosis: the output is the reference with decay = 0\.9, within rounding: "
            r"`decay` was given in float32",
        ),
        "decay-torch-bfloat16": (
            "torch",
            gated_torch(lambda: tensor(0.9, "bfloat16")),
            r"diagnosis: the output is the reference with decay = 0\.9, within rounding: "
            r"`decay` was given in bfloat16, which holds 0\.8984375",
        ),
        "inputs-jax-bfloat16": (
            "jax",
            lambda call: call(
                _jax_softmax,
                framework="jax",
                dtype="bfloat16",
                inputs=tuple(bf16(x) for x in (Q, K, V)),
            ),  # fmt: skip
            r"^verified",
        ),
    }


@pytest.mark.parametrize("public", sorted(PUBLIC))
@pytest.mark.parametrize(
    "name", ["decay-torch-float32", "decay-torch-bfloat16", "inputs-jax-bfloat16"]
)
def test_framework_values_end_in_a_report_that_says_what_happened(name, public):
    module, make, pattern = _framework_verdicts()[name]
    pytest.importorskip(module)
    assert re.search(pattern, _report_text(make, PUBLIC[public])), name
