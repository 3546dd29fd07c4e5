"""verify.attention over drawn combinations of its options: a report or a refusal, nothing else.

Hypothesis draws a framework (NumPy, and PyTorch and JAX where installed), a
family (softmax, linear, gated with a constant, per-head or sampled decay), a
precision, layout, batch and heads, the state, gradient, stabiliser,
accumulation, error-model, timeout and case options, a correct layer written
once for the three frameworks (:func:`_layer`) and sometimes a broken one, and
the values a user hands over (``inputs=`` as the framework's arrays, a decay
array or tensor, ``fn_kwargs``; a torch layer is an ``nn.Module`` with a
parameter).  Many combinations are invalid on purpose.  Every call must end in
a report (or, for the pytest twin, the ``AssertionError`` or ``Inconclusive``
of a report that is not verified) or an :class:`InvalidArgument`, never
another exception, and must leave every value the user handed over as it was:
its numbers, dtype and ``requires_grad``, the module's parameters (no
``.grad``) and training flag, torch's grad mode.

Derandomized under the ``kernelcheck-ci`` profile, with a handful of examples
(a fifth of the profile's count, at least ten); ``kernelcheck-thorough``
draws 400.
"""

from __future__ import annotations

import importlib.util
import math

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kernelcheck import testing, verify
from kernelcheck.errors import Inconclusive, InvalidArgument

FRAMEWORKS = tuple(
    fw for fw in ("numpy", "torch", "jax") if fw == "numpy" or importlib.util.find_spec(fw)
)
DTYPES = (None, "float64", "float32", "float16", "bfloat16")
FAMILIES = ("softmax", "linear", "gated")
DECAYS = ("number", "per head", "per head (H, 1)", "float32", "sampler")
BROKEN = ("correct", "correct", "correct", "scaled", "nan", "raises", "short", "none", "scribbles")
BATCHES = ((), (2,), (1, 2), (2, 2), (3, 2), (1,) * 17)
CASES = (None, ("random",), ("random", "n=1"), ("odd length", "repeated tokens"), ())

#: examples per run: a handful under kernelcheck-ci (50 -> 10), 400 under kernelcheck-thorough
EXAMPLES = max(10, settings().max_examples // 5)


class _Ops:
    """The few array operations a layer needs, in one framework."""

    def __init__(self, framework: str):
        self.fw = framework
        if framework == "torch":
            import torch

            self.xp = torch
        elif framework == "jax":
            import jax.numpy as jnp

            self.xp = jnp
        else:
            self.xp = np

    def swap(self, x, a=-1, b=-2):
        return x.transpose(a, b) if self.fw == "torch" else self.xp.swapaxes(x, a, b)

    def cumsum(self, x, axis):
        return self.xp.cumsum(x, dim=axis) if self.fw == "torch" else self.xp.cumsum(x, axis=axis)

    def total(self, x, axis):
        if self.fw == "torch":
            return x.sum(dim=axis, keepdim=True)
        return x.sum(axis=axis, keepdims=True)

    def repeat(self, x, r, axis):
        if self.fw == "torch":
            return self.xp.repeat_interleave(x, r, dim=axis)
        return self.xp.repeat(x, r, axis=axis)

    def like(self, value, x):
        """``value`` (a number or a NumPy array) as an array of ``x``'s framework and dtype."""
        if self.fw == "torch":
            return self.xp.tensor(np.asarray(value, dtype=np.float64)).to(x.dtype)
        return self.xp.asarray(np.asarray(value, dtype=np.float64)).astype(x.dtype)

    def tril(self, n, x):
        return self.like(np.tril(np.ones((n, n))), x) > 0

    def where(self, mask, a, b):
        return self.xp.where(mask, a, b)

    def rowmax(self, x):
        return x.amax(-1, keepdim=True) if self.fw == "torch" else x.max(-1, keepdims=True)


def _layer(o: dict):
    """A correct layer for the drawn options, written once for the three frameworks.

    Softmax (scale ``1/sqrt(d)``), linear attention with ``elu + 1`` features
    (normalised or not, a declared stabiliser added to the normaliser) and
    gated linear attention (decays ``exp(L_i - L_j)`` from cumulative log
    gates), causal or not, in either layout, with grouped query/key heads, and
    with a state ``(S, z)`` handed in and back for ``state=True``.
    """
    ops = _Ops(o["framework"])
    xp = ops.xp
    bnhd, group = o["layout"] == "bnhd", o["group"]

    def features(x):
        return ops.where(x > 0, x + 1.0, xp.exp(ops.where(x > 0, 0.0 * x, x)))

    def forward(q, k, v, *handed, initial_state=None, **kwargs):
        if bnhd:
            q, k, v = (ops.swap(x, -3, -2) for x in (q, k, v))
        if group > 1:
            q, k = ops.repeat(q, group, -3), ops.repeat(k, group, -3)
        n = q.shape[-2]
        causal = ops.tril(n, q)
        if o["family"] == "softmax":
            s = q @ ops.swap(k) / math.sqrt(q.shape[-1])
            if o["causal"]:
                s = ops.where(causal, s, -math.inf)
            e = xp.exp(s - ops.rowmax(s))
            return _out(e @ v / ops.total(e, -1), bnhd, ops)
        fq, fk = features(q), features(k)
        logs = 0.0 * q[..., 0]
        if o["family"] == "gated":
            if handed:
                g = ops.swap(handed[0]) if bnhd else handed[0]
                logs = g if o["log_gates"] else xp.log(g)
            else:
                logs = logs + ops.like(np.log(np.float64(o["decay_values"])), logs)
        L = ops.cumsum(logs, -1)
        D = xp.exp(L[..., :, None] - L[..., None, :])
        W = fq @ ops.swap(fk) * (ops.where(causal, D, 0.0 * D) if o["causal"] else D)
        num, den = W @ v, ops.total(W, -1)
        if initial_state is not None:
            S0, z0 = initial_state
            S0 = ops.swap(S0) if o["state_layout"] == "value-major" else S0
            lead = xp.exp(L)[..., None] * fq
            num = num + lead @ S0
            if o["normalize"]:
                den = den + lead @ z0[..., None]
        out = num / (den + (o["stabilizer"] or 0.0)) if o["normalize"] else num
        out = _out(out, bnhd, ops)
        if not o["state"]:
            return out
        last = xp.exp(L[..., -1:] - L)[..., None] * fk
        S, z = ops.swap(last) @ v, last.sum(-2)
        if initial_state is not None:
            S = S + xp.exp(L[..., -1:])[..., None] * S0
            z = z + xp.exp(L[..., -1:]) * z0 if o["normalize"] else z
        S = ops.swap(S) if o["state_layout"] == "value-major" else S
        return out, ((S, z) if o["normalize"] else (S, None))

    return _broken(forward, o["broken"], ops)


def _out(out, bnhd, ops):
    return ops.swap(out, -3, -2) if bnhd else out


def _broken(forward, how: str, ops):
    """The correct ``forward``, or one of the typical ways a layer goes wrong."""
    if how == "correct":
        return forward

    def layer(q, k, v, *handed, initial_state=None, **kwargs):
        if how == "raises":
            raise RuntimeError("the layer failed")
        if how == "none":
            return None
        if how == "scribbles" and ops.fw == "numpy":
            q *= -3.0  # writes into the array it was handed
        raw = forward(q, k, v, *handed, initial_state=initial_state, **kwargs)
        out, rest = (raw[0], raw[1:]) if isinstance(raw, tuple) else (raw, ())
        if how == "scaled":
            out = out * 1.5
        elif how == "nan":
            out = out * math.nan
        elif how == "short":
            out = out[..., :-1, :]
        return (out, *rest) if rest else out

    return layer


def _module(layer):
    """A torch ``nn.Module`` around ``layer``, with a parameter of 1 that multiplies its output."""
    import torch

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gain = torch.nn.Parameter(torch.ones(()))

        def forward(self, q, k, v, *handed, initial_state=None, **kwargs):
            raw = layer(q, k, v, *handed, initial_state=initial_state, **kwargs)
            if isinstance(raw, tuple):
                return (self.gain.to(raw[0].dtype) * raw[0], *raw[1:])
            return raw if raw is None else self.gain.to(raw.dtype) * raw

    return Layer()


#: the dtypes a framework holds arrays in (jax's float64 needs 64-bit JAX: a twist)
FRAMEWORK_DTYPES = {
    "numpy": (None, "float64", "float32", "float16", "tf32"),
    "torch": (None, "float64", "float32", "float16", "bfloat16", "tf32"),
    "jax": (None, "float32", "bfloat16", "tf32"),
}

#: hostile changes to a valid call, one at most per call: most are refused, some judged
TWISTS = {
    "softmax-unnormalised": dict(family="softmax", normalize=False),
    "gated-bidirectional": dict(family="gated", causal=False),
    "state-bidirectional": dict(family="linear", causal=False, state=True),
    "stabilizer-unnormalised": dict(family="linear", normalize=False, stabilizer=1e-6),
    "bnhd-one-axis": dict(layout="bnhd", batch=(2,)),
    "many-axes": dict(batch=(1,) * 17),
    "decay-(H, 1)": dict(family="gated", causal=True, decay="per head (H, 1)"),
    "log_gates-constant": dict(family="gated", causal=True, decay="number", log_gates=True),
    "qk_heads-with-inputs": dict(inputs=True, qk_heads=1, batch=(2, 2)),
    "dtype-float64-jax": dict(framework="jax", dtype="float64"),
    "dtype-bfloat16-numpy": dict(framework="numpy", dtype="bfloat16"),
    "accumulate-bfloat16": dict(accumulate="bfloat16", n=6),
    "no-cases": dict(inputs=False, cases=()),
    "packed": dict(offsets=True),
}


@st.composite
def calls(draw):
    """The options of one call (valid by construction, then at most one twist), the layer."""
    family = draw(st.sampled_from(FAMILIES))
    framework = draw(st.sampled_from(FRAMEWORKS))
    batch = draw(st.sampled_from(BATCHES[:-1]))
    linear = family != "softmax"
    inputs = draw(st.booleans())
    o: dict = dict(
        framework=framework, family=family, batch=batch, inputs=inputs,
        causal=True if family == "gated" else draw(st.booleans()),
        normalize=draw(st.booleans()) if linear else True,
        layout=draw(st.sampled_from(("...nd", "bnhd"))) if len(batch) == 2 else "...nd",
        qk_heads=draw(st.sampled_from((None, 1))) if batch and not inputs else None,
        state_layout=draw(st.sampled_from(("key-major", "value-major"))),
        decay=draw(st.sampled_from(DECAYS[:1] + DECAYS[2:] + ((DECAYS[1],) if batch else ()))),
        broken=draw(st.sampled_from(BROKEN)),
        dtype=draw(st.sampled_from(FRAMEWORK_DTYPES[framework])),
        accumulate=draw(st.sampled_from((None, None, "float32", "float16"))),
        n=draw(st.integers(2, 6)),
        cases=None if inputs else draw(st.sampled_from(CASES[:-1])),
    )  # fmt: skip
    o["state"] = draw(st.booleans()) if linear and o["causal"] else False
    o["stabilizer"] = draw(st.sampled_from((None, 1e-6))) if linear and o["normalize"] else None
    o["log_gates"] = draw(st.booleans()) if o["decay"] == "sampler" else False
    twist = draw(st.sampled_from(("none",) * 3 + tuple(TWISTS)))
    o.update(TWISTS.get(twist, {}))
    # the user's inputs carry their own batch: mostly batch_shape's, sometimes another
    o["inputs_batch"] = draw(st.sampled_from((o["batch"],) * 3 + BATCHES[:-1]))
    o.update(
        d=draw(st.sampled_from((None, 2, 3))), grad=draw(st.booleans()),
        error_model=draw(st.sampled_from(("worst-case", "probabilistic"))),
        timeout=draw(st.sampled_from((None, 30.0, 1e10))), check_causality=draw(st.booleans()),
        fn_kwargs=draw(st.booleans()),
        public=draw(st.sampled_from(("verify.attention", "testing.assert_attention_matches"))),
    )  # fmt: skip
    return _build(o)


def _build(o: dict):
    """The options of ``verify.attention`` for the drawn ``o``, and the public call to make."""
    heads = o["batch"][-1] if o["batch"] else 1
    o["group"] = heads // o["qk_heads"] if o["qk_heads"] else 1
    o["decay_values"] = (
        np.linspace(0.6, 0.95, heads).reshape(heads, 1)
        if o["decay"] == "per head" and o["batch"]
        else np.float32(0.9) if o["decay"] == "float32" else 0.9
    )  # fmt: skip
    options = dict(
        causal=o["causal"], layout=o["layout"], batch_shape=o["batch"], state=o["state"],
        state_layout=o["state_layout"], qk_heads=o["qk_heads"], stabilizer=o["stabilizer"],
        framework=o["framework"], n=o["n"], d=o["d"], dtype=o["dtype"], grad=o["grad"],
        accumulate=o["accumulate"], error_model=o["error_model"], timeout=o["timeout"],
        cases=o["cases"], normalize=o["normalize"], check_causality=o["check_causality"],
    )  # fmt: skip
    if o["family"] != "softmax":
        options["feature_map"] = _elu1
    if o["family"] == "gated":
        options.update(_decay_option(o, heads))
        options["log_gates"] = o["log_gates"]
    if o["fn_kwargs"]:
        options["fn_kwargs"] = {"extra": np.ones(2)}
    if o.get("offsets"):  # packed sequences, which the layer ignores (its **kwargs)
        options["offsets"] = [0, 1, o["n"]]
    return o, options, o["public"]


def _elu1(X):
    return np.where(X > 0, X + 1.0, np.exp(np.minimum(X, 0.0)))


def _decay_option(o: dict, heads: int) -> dict:
    """``decay=`` as the drawn kind: a number, per head, the forms' (H, 1), float32, a sampler."""
    kind = o["decay"]
    if kind == "sampler":
        return {"decay": lambda rng, shape: rng.uniform(0.5, 1.0, shape)}
    if kind == "per head":
        return {"decay": np.reshape(o["decay_values"], -1)[:heads].copy()}
    if kind == "per head (H, 1)":
        return {"decay": np.full((heads, 1), 0.9)}
    if kind == "float32" and o["framework"] == "torch":
        import torch

        return {"decay": torch.tensor(0.9)}
    return {"decay": o["decay_values"]}


def _user_inputs(o: dict, options: dict):
    """``inputs=`` in the layer's framework and layout (torch tensors that require gradients)."""
    rng = np.random.default_rng(5)
    batch = o["inputs_batch"]
    d = options["d"] or 2
    arrays = [rng.standard_normal(batch + (4, d)) for _ in range(3)]
    if o["layout"] == "bnhd" and len(batch) == 2:
        arrays = [np.swapaxes(a, -3, -2) for a in arrays]
    if o["framework"] == "torch":
        import torch

        return tuple(torch.tensor(a, requires_grad=True) for a in arrays)
    if o["framework"] == "jax":
        import jax.numpy as jnp

        return tuple(jnp.asarray(a, dtype=jnp.float32) for a in arrays)
    return tuple(arrays)


def _snapshot(values) -> list:
    """Copies of every array, tensor and parameter handed over, with their dtype and flags."""
    out = []
    for v in values:
        if hasattr(v, "detach"):  # a torch tensor or parameter
            out.append((v, v.detach().clone(), v.requires_grad, v.grad))
        elif isinstance(v, np.ndarray) or hasattr(v, "dtype"):
            out.append((v, np.array(v, copy=True), None, None))
    return out


def _unchanged(snapshot) -> bool:
    for v, copy, requires_grad, grad in snapshot:
        if hasattr(v, "detach"):
            import torch

            if not (torch.equal(v.detach(), copy) and v.dtype == copy.dtype):
                return False
            if v.requires_grad != requires_grad or v.grad is not grad:
                return False
        elif not (np.array_equal(np.asarray(v), copy) and np.asarray(v).dtype == copy.dtype):
            return False
    return True


#: a valid call, the base of the explicit examples every profile runs
BASE = dict(
    framework="numpy", family="softmax", batch=(), inputs=False, causal=False, normalize=True,
    layout="...nd", qk_heads=None, state_layout="key-major", decay="number", broken="correct",
    dtype=None, accumulate=None, n=4, cases=("random",), state=False, stabilizer=None,
    log_gates=False, inputs_batch=(), d=None, grad=False, error_model="worst-case", timeout=None,
    check_causality=True, fn_kwargs=False, public="verify.attention",
)  # fmt: skip

#: explicit examples: a torch module's gradients, a stabiliser without a normaliser
EXAMPLES_GIVEN = [
    _build({**BASE, **changes})
    for changes in (
        dict(family="linear", normalize=False, stabilizer=1e-6, causal=True),
        *(
            [dict(framework="torch", grad=True, inputs=True, cases=None)]
            if "torch" in FRAMEWORKS
            else []
        ),
    )
]


def _with_examples(test):
    for drawn in EXAMPLES_GIVEN:
        test = example(drawn)(test)
    return test


@settings(max_examples=EXAMPLES)
@_with_examples
@given(calls())
def test_every_call_ends_in_a_report_or_a_refusal_and_changes_nothing_it_is_handed(drawn):
    o, options, public = drawn
    options, fn = dict(options), _layer(o)
    handed = [options.get("decay"), *(options.get("fn_kwargs") or {}).values()]
    if o["inputs"]:
        options["inputs"] = _user_inputs(o, options)
        handed += list(options["inputs"])
    grad_mode = None
    if o["framework"] == "torch":
        import torch

        fn = _module(fn)
        handed += list(fn.parameters())
        grad_mode = torch.is_grad_enabled()
    before = _snapshot(handed)
    call = verify.attention if public == "verify.attention" else testing.assert_attention_matches
    try:
        report = call(fn, **options)
    except InvalidArgument:
        report = None
    except (AssertionError, Inconclusive):  # the pytest twin's report that is not verified
        assert public != "verify.attention"
        report = None
    if report is not None:
        assert str(report) and report.details() is not None and report.to_dict()
    assert _unchanged(before), "the call changed a value it was handed"
    if grad_mode is not None:
        import torch

        assert fn.training and torch.is_grad_enabled() == grad_mode
