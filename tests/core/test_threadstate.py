"""Framework modes travel with a user's call into the thread that runs it under a deadline.

Each row sets one thread-local mode of PyTorch or JAX in the test's thread,
then asks, from inside a call made through ``run_user`` under a deadline
(so in a new thread), what the framework computes there; the answer must be
the one the test's own thread gives.  The same question asked from a plain
new thread (no carrying) must give the other answer, so each row can fail.
"""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

from kernelcheck._src.core.deadline import run_user, user_deadline
from kernelcheck._src.core.threadstate import capture

pytestmark = pytest.mark.filterwarnings("ignore:Explicitly requested dtype float64")

torch = pytest.importorskip("torch")
jax = pytest.importorskip("jax")
jnp = jax.numpy


def _in_new_thread(question):
    """``question()`` asked in a fresh thread that carries nothing."""
    answer = []
    t = threading.Thread(target=lambda: answer.append(question()))
    t.start()
    t.join()
    return answer[0]


def _x64_dtype():
    return str(jnp.asarray(1.0, dtype=jnp.float64).dtype)


def _matmul_precision():
    return jax.config.jax_default_matmul_precision


def _grad():
    return torch.is_grad_enabled()


def _inference():
    return torch.is_inference_mode_enabled()


def _autocast_matmul_dtype():
    a = torch.ones(2, 2)
    return (a @ a).dtype


def _default_device():
    return torch.empty(1).device.type


#: id -> (a context manager setting one thread-local mode, a question it changes the answer to)
MODES = {
    "jax enable_x64": (lambda: jax.enable_x64(True), _x64_dtype),
    "jax default_matmul_precision": (
        lambda: jax.default_matmul_precision("float32"),
        _matmul_precision,
    ),
    "torch no_grad": (torch.no_grad, _grad),
    "torch inference_mode": (torch.inference_mode, _inference),
    "torch autocast cpu bfloat16": (
        lambda: torch.autocast("cpu", dtype=torch.bfloat16),
        _autocast_matmul_dtype,
    ),
    "torch default device": (lambda: torch.device("meta"), _default_device),
}


@pytest.mark.parametrize("name", sorted(MODES))
def test_a_user_call_under_a_deadline_runs_in_the_callers_mode(name):
    mode, question = MODES[name]
    with mode():
        here = question()
        bare = _in_new_thread(question)
        with user_deadline(60.0):
            there = run_user(question, "`f`")
    assert bare != here, "the mode is not thread-local: this row tests nothing"
    assert there == here


@pytest.mark.parametrize("name", sorted(MODES))
def test_the_callers_mode_is_left_as_it_was_in_both_threads(name):
    mode, question = MODES[name]
    before = question()
    with mode():
        inside = question()
        enter = capture()

        def in_thread():
            with enter():
                pass
            return question()

        after_in_thread = _in_new_thread(in_thread)
        assert question() == inside
    assert question() == before
    assert after_in_thread == _in_new_thread(question)


def test_a_correct_float64_jax_layer_passes_under_a_timeout():
    """The float64 layer computes in float64 in the thread that runs it, as without timeout=."""
    from kernelcheck import verify

    def layer(Q, K, V):
        n, d = Q.shape
        scores = jnp.where(jnp.tri(n, dtype=bool), Q @ K.T / jnp.sqrt(d), -jnp.inf)
        return jax.nn.softmax(scores, axis=-1) @ V

    with jax.enable_x64(True):
        kw = dict(framework="jax", dtype="float64", causal=True, cases=("random",))
        plain = verify.attention(layer, **kw)
        timed = verify.attention(layer, timeout=60, **kw)
    assert plain.passed, plain.details()
    assert timed.passed, timed.details()


def test_no_framework_is_imported_to_carry_its_modes():
    code = (
        "import sys\n"
        "from kernelcheck._src.core.deadline import run_user, user_deadline\n"
        "with user_deadline(5.0):\n"
        "    assert run_user(lambda: 3, 'f') == 3\n"
        "print(sorted(m for m in ('torch', 'jax') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
