"""Precision models users compute in: TF32 products of float32 layers (``dtype="tf32"``).

Many GPU matmul paths (and JAX's default precision on accelerators) round
the operands of float32 products to TF32 (10 stored mantissa bits).  A
correct layer doing so fails ``dtype="float32"`` (it is not a float32
computation) and passes ``dtype="tf32"``; a real bug still fails.  The
layer here emulates the format with ``round_to(x, "tf32")`` on each
product's operands, float32 sums.  ``dtype="tf32-nearest"`` declares that
the operands are rounded to nearest, never truncated: the systematic-error
test then judges the layer too, which a truncating layer fails.
"""

from __future__ import annotations

import numpy as np

from kernelcheck import verify
from kernelcheck._src.verify.adapters import round_to


def tf32(X):
    return round_to(np.asarray(X, dtype=np.float64), "tf32").astype(np.float32)


def truncated(X):
    """Float32 to TF32 toward zero: the 13 low fraction bits dropped."""
    bits = np.asarray(X, dtype=np.float32).view(np.uint32) & np.uint32(0xFFFFE000)
    return bits.view(np.float32)


def tf32_softmax(scale_factor: float = 1.0, operand=tf32, late: float = 0.0):
    """Causal softmax in float32 whose two products round their operands to TF32.

    ``operand`` converts an operand (to nearest, or :func:`truncated`);
    ``late`` is a relative error on the rows from n/2 on.
    """

    def layer(Q, K, V):
        Q, K, V = (np.asarray(X, dtype=np.float32) for X in (Q, K, V))
        d = Q.shape[-1]
        s = (operand(Q) @ np.swapaxes(operand(K), -1, -2)) * np.float32(scale_factor / np.sqrt(d))
        n = s.shape[-1]
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf).astype(np.float32)
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        p = p / p.sum(axis=-1, keepdims=True)
        out = operand(p) @ operand(V)
        out[..., n // 2 :, :] *= np.float32(1.0 + late)
        return out

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


def _tier(report):
    return [c for c in report.checks if c.name.startswith("systematic error")]


def test_declared_rounding_to_nearest_lets_the_systematic_test_judge_tf32():
    """A relative error of 3e-4 from n/2 on: within TF32's worst-case bound (it passes
    ``dtype="tf32"``, whose operands may be truncated: no systematic-error test), caught
    by that test when the products are declared rounded to nearest; the correct layer
    passes both."""
    kw = dict(causal=True, cases=("random", "positive values", "across blocks"))
    loose = verify.attention(tf32_softmax(late=3e-4), dtype="tf32", **kw)
    assert loose.passed, loose.details()
    assert all(c.passed is None and "truncated" in c.note for c in _tier(loose))
    for dtype in ("tf32", "tf32-nearest"):
        correct = verify.attention(tf32_softmax(), dtype=dtype, **kw)
        assert correct.passed, correct.details()
    assert [c.passed for c in _tier(correct)] == [True]
    bug = verify.attention(tf32_softmax(late=3e-4), dtype="tf32-nearest", **kw)
    assert not bug.passed and [c.passed for c in _tier(bug)] == [False]
    assert "storage tf32-nearest, accumulation float32" in bug.precision


def test_a_layer_that_truncates_tf32_operands_must_not_be_declared_nearest():
    """Truncation shrinks every operand by half an ulp on average (an error of one sign):
    the worst-case bound of ``dtype="tf32"`` covers it, the systematic-error test of
    ``"tf32-nearest"`` sees it as the systematic error it is."""
    kw = dict(causal=True, cases=("random", "positive values", "across blocks"))
    report = verify.attention(tf32_softmax(operand=truncated), dtype="tf32", **kw)
    assert report.passed, report.details()
    declared = verify.attention(tf32_softmax(operand=truncated), dtype="tf32-nearest", **kw)
    assert not declared.passed and [c.passed for c in _tier(declared)] == [False]
