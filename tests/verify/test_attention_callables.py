"""User callables in ``verify.attention``: non-real output is refused, ``timeout=`` is honoured.

A layer (or a reference feature map) returning complex, object or string
arrays gets an ``InvalidArgument`` naming it -- no verdict is drawn from
such numbers -- while a layer that raises is still a failed case (a
finding).  A layer that blocks is abandoned at ``timeout`` seconds with an
error naming the callable and ``timeout``.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from kernelcheck import verify
from kernelcheck.errors import InvalidArgument
from kernelcheck.testing import assert_attention_matches


def _softmax(Q, K, V):
    S = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    W = np.exp(S - S.max(-1, keepdims=True))
    return (W / W.sum(-1, keepdims=True)) @ V


NON_REAL = {
    "complex": lambda a: a + 0j,
    "object": lambda a: a.astype(object),
    "string": lambda a: a.astype(str),
}


@pytest.mark.parametrize("kind", sorted(NON_REAL))
def test_non_real_output_of_fn_is_refused_naming_fn(kind):
    def layer(Q, K, V):
        return NON_REAL[kind](_softmax(Q, K, V))

    with pytest.raises(InvalidArgument, match=r"^`fn` returned .*expected real numbers"):
        verify.attention(layer, n=8)


def test_a_complex_tensor_from_a_torch_layer_is_refused():
    def layer(Q, K, V):
        return F.scaled_dot_product_attention(Q, K, V).to(torch.complex128)

    with pytest.raises(InvalidArgument, match=r"^`fn` returned .*complex"):
        verify.attention(layer, framework="torch", dtype="float64", n=8)


def test_a_complex_jax_array_is_refused():
    jnp = pytest.importorskip("jax.numpy")

    def layer(Q, K, V):
        S = Q @ jnp.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
        W = jnp.exp(S - S.max(-1, keepdims=True))
        return ((W / W.sum(-1, keepdims=True)) @ V).astype(jnp.complex64)

    with pytest.raises(InvalidArgument, match=r"^`fn` returned .*complex"):
        verify.attention(layer, framework="jax", dtype="float32", n=8)


def test_a_complex_feature_map_is_refused_naming_it():
    def layer(Q, K, V):
        fq, fk = np.exp(Q), np.exp(K)
        A = fq @ np.swapaxes(fk, -1, -2)
        return (A @ V) / A.sum(-1, keepdims=True)

    with pytest.raises(InvalidArgument, match=r"^`feature_map` \(Q\) returned .*complex"):
        verify.attention(layer, feature_map=lambda X: np.exp(X) + 0j, n=8)


def test_a_raising_layer_is_still_a_failed_case():
    def layer(Q, K, V):
        raise RuntimeError("kernel launch failed")

    report = verify.attention(layer, n=8, cases=("random",))
    assert not report.passed
    assert "fn raised RuntimeError: kernel launch failed" in report.details()


RELEASE = threading.Event()


def _blocking(Q, K, V):
    RELEASE.wait(30)
    return _softmax(Q, K, V)


@pytest.mark.parametrize("call", ["verify.attention", "assert_attention_matches"])
def test_a_blocking_fn_is_abandoned_at_the_timeout(call):
    check = verify.attention if call == "verify.attention" else assert_attention_matches
    RELEASE.clear()
    try:
        with pytest.raises(InvalidArgument, match=r"^`fn` did not return within timeout=0.2 s"):
            check(_blocking, n=8, timeout=0.2)
    finally:
        RELEASE.set()


def test_a_blocking_backward_pass_is_abandoned_at_the_timeout():
    release = threading.Event()

    def layer(Q, K, V):
        if Q.requires_grad:  # the gradient check's call
            release.wait(30)
        return F.scaled_dot_product_attention(Q, K, V)

    try:
        with pytest.raises(
            InvalidArgument, match=r"^`fn` \(its backward pass\) did not return within timeout"
        ):
            verify.attention(layer, framework="torch", n=8, grad=True, timeout=0.5)
    finally:
        release.set()


def test_a_timeout_leaves_a_quick_layer_alone():
    report = verify.attention(_softmax, n=8, timeout=30)
    assert report.passed, report.details()


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), "1", True])
def test_timeout_must_be_a_positive_number(bad):
    with pytest.raises(InvalidArgument, match=r"`timeout`"):
        verify.attention(_softmax, n=8, timeout=bad)


@pytest.mark.parametrize("value", [1e308, -1.7e308])
def test_a_layer_near_the_float_maximum_fails_without_a_warning(value):
    """Outputs near 1.8e308 against a reference of order 1: every case fails, and the
    difference (or its ratio to the tolerance) beyond the float range is said, not
    leaked as an overflow warning (the suite turns RuntimeWarnings into errors)."""
    r = verify.attention(lambda Q, K, V: np.full(V.shape, value))
    assert not r.passed
    judged = [c for c in r.cases if c.passed is not None]
    assert judged and all(c.passed is False for c in judged)
    assert all(c.max_error > 1e300 for c in judged)
