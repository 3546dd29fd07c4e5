"""User callbacks never see the caller's arrays, and their non-real results are refused by name.

One table of callback-taking public calls (kernels from functions, feature
maps, samplers, trial functions, Nystrom kernels, random-feature layers) and
one of layers under ``verify.attention``:

* a callback that writes into its arguments leaves the caller's arrays as they
  were, and the verdict is computed on the caller's own data;
* a callback's complex, object or string output is refused with
  ``InvalidArgument`` naming it, never cast.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck import attention, psd, stats, testing, verify
from kernelcheck.errors import InvalidArgument
from kernelcheck.kernels import (
    Linear,
    kernel_from_function,
)

RNG = np.random.default_rng(17)
X = RNG.normal(size=(4, 3))
Q, K, V = (RNG.normal(size=(5, 3)) for _ in range(3))


def _scribble(*args):
    """A callback that writes into every array it is given, then returns a fixed answer."""
    for a in args:
        if isinstance(a, np.ndarray) and a.flags.writeable:
            a *= -3.0
    return None


def _map(returns):
    def phi(Z):
        _scribble(Z)
        return returns(Z)

    return phi


#: id -> call(callback) where the callback's return value is made by ``returns``; the
#: caller's arrays (X, Q, K, V) must not change whatever the callback writes.
CALLBACK_CALLS = {
    "kernel_from_function": lambda r: kernel_from_function(
        lambda a, b: (_scribble(a, b), r(X))[1], vectorized=True
    )(X),
    "verify.feature_map": lambda r: verify.feature_map(_map(r), X, kernel=Linear()),
    "assert_feature_map": lambda r: testing.assert_feature_map(_map(r), X, kernel=Linear()),
    "verify.attention-feature_map": lambda r: verify.attention(
        lambda q, k, v: v, feature_map=_map(r), inputs=(Q, K, V)
    ),
    "nystrom-kernel": lambda r: psd.Nystrom(lambda A, B=None: _map(r)(A), X),
    "run_trials": lambda r: stats.run_trials(lambda rng, count: r(np.ones((count, 2))), 4, seed=0),
    "verify.unbiased-sample": lambda r: verify.unbiased(
        lambda rng: _map(r), Linear(), X, trials=8, seed=0
    ),
    "kernelized-kernel": lambda r: attention.kernelized(
        Q, K, V, lambda A, B: (_scribble(A, B), r(np.ones((A.shape[0], B.shape[0]))))[1]
    ),
    "verify.random_feature_attention-fn": lambda r: verify.random_feature_attention(
        lambda q, k, v, m, rng: (_scribble(q, k, v), r(np.ones((q.shape[0], 1))))[1],
        Q,
        K,
        V,
        trials=4,
        seed=0,
        num_features=(2, 4, 8),
    ),
    "testing.assert_random_feature_attention-fn": lambda r: testing.assert_random_feature_attention(
        lambda q, k, v, m, rng: (_scribble(q, k, v), r(np.ones((q.shape[0], 1))))[1],
        Q,
        K,
        V,
        trials=4,
        seed=0,
        num_features=(2, 4, 8),
    ),
}

#: layers under verify.attention: a layer that writes into its inputs never changes the
#: caller's arrays (its complex output is refuted, not refused: a known gap, see
#: docs/reliability.md)
LAYER_CALLS = {
    "verify.attention": lambda: verify.attention(
        lambda q, k, v: (_scribble(q, k, v), attention.softmax(q, k, v))[1], inputs=(Q, K, V)
    ),
    "verify.attention-causal-grad": lambda: verify.attention(
        lambda q, k, v: (_scribble(q, k, v), attention.softmax(q, k, v, causal=True))[1],
        inputs=(Q, K, V),
        causal=True,
    ),
    "testing.assert_attention_matches": lambda: testing.assert_attention_matches(
        lambda q, k, v: (_scribble(q, k, v), attention.softmax(q, k, v))[1], inputs=(Q, K, V)
    ),
}


@pytest.mark.parametrize("name", sorted(LAYER_CALLS))
def test_a_layer_that_writes_into_its_inputs_never_changes_the_callers_arrays(name):
    try:
        LAYER_CALLS[name]()
    except (AssertionError, InvalidArgument):
        pass  # the verdict on a scribbling layer is not the point here
    for key, value in CALLERS.items():
        assert np.array_equal(value, SNAPSHOT[key]), f"{name} changed the caller's {key}"


CALLERS = {"X": X, "Q": Q, "K": K, "V": V}
SNAPSHOT = {k: v.copy() for k, v in CALLERS.items()}

#: what a misbehaving callback returns
BAD_RESULTS = {
    "complex": lambda Z: np.ones((Z.shape[0], Z.shape[0]), dtype=complex) + 1j,
    "object": lambda Z: np.full((Z.shape[0], Z.shape[0]), None, dtype=object),
    "string": lambda Z: np.full((Z.shape[0], Z.shape[0]), "1"),
    "python-complex": lambda Z: 1 + 2j,
}


@pytest.mark.parametrize("name", sorted(CALLBACK_CALLS))
@pytest.mark.parametrize("result", sorted(BAD_RESULTS))
def test_callbacks_returning_non_real_numbers_are_refused_and_never_see_the_callers_arrays(
    name, result
):
    with pytest.raises(InvalidArgument, match=r"returned .*expected real numbers"):
        CALLBACK_CALLS[name](BAD_RESULTS[result])
    for key, value in CALLERS.items():
        assert np.array_equal(value, SNAPSHOT[key]), f"{name} changed the caller's {key}"


def test_callbacks_that_write_into_their_argument_do_not_change_the_verdict():
    """phi(Z) = Z after scribbling: the verdict is computed on the caller's own X."""
    rep = verify.feature_map(
        _map(lambda Z: X.copy() if Z.shape == X.shape else Z), X, kernel=Linear()
    )
    assert rep.passed and np.array_equal(X, SNAPSHOT["X"])


#: ratio_bias on inputs whose attention output is exact (the same in every trial) or
#: varies only by rounding: a refusal saying why, never a FAIL from fitting rounding
_RB = np.random.default_rng(16)
RB_Q, RB_K, RB_V = _RB.normal(size=(3, 2)), _RB.normal(size=(5, 2)), _RB.normal(size=(5, 2))


def _projection_sampler(convert):
    """Random projections (unbiased for the linear kernel), their output through ``convert``."""

    def sample(rng):
        W = rng.standard_normal((X.shape[1], 64))
        return lambda Z: convert(Z @ W / 8.0)

    return sample


#: callbacks whose numbers may come back as a framework's bfloat16: id -> call(convert)
BFLOAT16_CALLBACKS = {
    "verify.unbiased-sample": lambda c: verify.unbiased(
        _projection_sampler(c), Linear(), X, trials=16, seed=0
    ),
    "verify.feature_map": lambda c: verify.feature_map(lambda Z: c(Z), X, kernel=Linear()),
    "verify.kernel": lambda c: verify.kernel(
        kernel_from_function(lambda A, B: c(A @ B.T), vectorized=False), X
    ),
}


@pytest.mark.parametrize("name", sorted(BFLOAT16_CALLBACKS))
def test_a_callback_returning_jax_bfloat16_is_judged_as_one_returning_torch_bfloat16(name):
    torch = pytest.importorskip("torch")
    jnp = pytest.importorskip("jax.numpy")
    call = BFLOAT16_CALLBACKS[name]
    expected = call(lambda a: torch.tensor(np.asarray(a), dtype=torch.bfloat16))
    assert str(call(lambda a: jnp.asarray(a, dtype=jnp.bfloat16))) == str(expected), name


#: the public calls that take a user's layer
ATTENTION_CALLS = {
    "verify.attention": verify.attention,
    "testing.assert_attention_matches": testing.assert_attention_matches,
}


def _torch_module():
    """A softmax attention nn.Module with parameters (a gain of 1 and a projection of V)."""
    torch = pytest.importorskip("torch")

    class Attention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gain = torch.nn.Parameter(torch.ones(()))
            self.value = torch.nn.Linear(3, 3, bias=False)
            with torch.no_grad():
                self.value.weight.copy_(torch.eye(3))
            self.register_buffer("calls", torch.zeros(()))

        def forward(self, q, k, v, initial_state=None):
            scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
            return self.gain * torch.softmax(scores, dim=-1) @ self.value(v)

    return Attention().double()


@pytest.mark.parametrize("given", ["generated", "inputs", "under torch.no_grad()"])
@pytest.mark.parametrize("name", sorted(ATTENTION_CALLS))
def test_the_gradient_check_leaves_a_torch_module_and_its_tensors_as_they_were(name, given):
    """Gradients of the inputs only: no parameter gains a .grad, no flag or value changes.

    Under the caller's ``torch.no_grad()`` the check still takes the gradients it was asked for.
    """
    torch = pytest.importorskip("torch")
    if given == "under torch.no_grad()":
        with torch.no_grad():
            _gradient_check_of_a_module(torch, name, "generated")
    else:
        _gradient_check_of_a_module(torch, name, given)


def _gradient_check_of_a_module(torch, name: str, given: str) -> None:
    module = _torch_module()
    before = {k: v.detach().clone() for k, v in module.state_dict().items()}
    flags = {k: p.requires_grad for k, p in module.named_parameters()}
    tensors = [torch.tensor(x, requires_grad=True) for x in (Q[:, :3], K[:, :3], V[:, :3])]
    values = [t.detach().clone() for t in tensors]
    options = dict(d=3) if given == "generated" else dict(inputs=tuple(tensors))
    grad_mode = torch.is_grad_enabled()
    report = ATTENTION_CALLS[name](module, framework="torch", dtype="float64", grad=True, **options)
    assert report.passed and any(c.name.startswith("gradient dQ") for c in report.checks)
    assert all(p.grad is None for p in module.parameters())
    assert module.training and torch.is_grad_enabled() == grad_mode
    assert {k: p.requires_grad for k, p in module.named_parameters()} == flags
    for key, value in module.state_dict().items():
        assert torch.equal(value, before[key]), key
    for t, v in zip(tensors, values, strict=True):
        assert t.grad is None and t.requires_grad and torch.equal(t.detach(), v)


@pytest.mark.parametrize("name", sorted(ATTENTION_CALLS))
def test_the_gradient_check_of_a_jax_layer_leaves_jax_as_it_was(name):
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    options = ("jax_enable_x64", "jax_default_matmul_precision", "jax_disable_jit")
    before = {o: getattr(jax.config, o) for o in options}
    gain = jnp.ones(())

    def layer(q, k, v):
        s = q @ jnp.swapaxes(k, -1, -2) / jnp.sqrt(jnp.asarray(q.shape[-1], q.dtype))
        return gain * jax.nn.softmax(s, axis=-1) @ v

    report = ATTENTION_CALLS[name](layer, framework="jax", grad=True)
    assert report.passed and any(c.name.startswith("gradient dQ") for c in report.checks)
    assert {o: getattr(jax.config, o) for o in options} == before and float(gain) == 1.0
