"""Precision models users compute in: TF32 products of float32 layers (``dtype="tf32"``).

Many GPU matmul paths (and JAX's default precision on accelerators) round
the operands of float32 products to TF32 (10 stored mantissa bits).  A
correct layer doing so fails ``dtype="float32"`` (it is not a float32
computation) and passes ``dtype="tf32"``; a real bug still fails.  The
layer here emulates the format with ``round_to(x, "tf32")`` on each
product's operands, float32 sums.
"""

from __future__ import annotations

import numpy as np

from kernelcheck import verify
from kernelcheck._src.verify.adapters import round_to


def tf32(X):
    return round_to(np.asarray(X, dtype=np.float64), "tf32").astype(np.float32)


def tf32_softmax(scale_factor: float = 1.0):
    """Causal softmax in float32 whose two products round their operands to TF32."""

    def layer(Q, K, V):
        Q, K, V = (np.asarray(X, dtype=np.float32) for X in (Q, K, V))
        d = Q.shape[-1]
        s = (tf32(Q) @ np.swapaxes(tf32(K), -1, -2)) * np.float32(scale_factor / np.sqrt(d))
        n = s.shape[-1]
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf).astype(np.float32)
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        p = p / p.sum(axis=-1, keepdims=True)
        return tf32(p) @ tf32(V)

    return layer


def test_a_tf32_layer_fails_float32_and_passes_tf32():
    kw = dict(causal=True, cases=("random", "positive values", "across blocks"))
    assert not verify.attention(tf32_softmax(), dtype="float32", **kw).passed
    report = verify.attention(tf32_softmax(), dtype="tf32", **kw)
    assert report.passed, report.details()
    assert "storage tf32, accumulation float32" in report.precision


def test_a_logit_scale_off_by_an_eighth_fails_tf32():
    kw = dict(causal=True, dtype="tf32", cases=("random", "positive values"))
    assert not verify.attention(tf32_softmax(9 / 8), **kw).passed
