"""The range rule of ``verify.attention``: stored values against the storage format, sums against
the accumulation format.

A 16-bit layer that keeps its running sums in float32 (the default
``accumulate=`` for 16-bit storage) is judged on inputs whose sums exceed
float16's range; one that declares a 16-bit accumulation has such a case
skipped as a test of the format; one that keeps a float16 state without
declaring it overflows and fails.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck import verify


def elu1(X):
    X = np.asarray(X, dtype=np.float64)
    return np.where(X > 0, X + 1.0, np.exp(np.minimum(X, 0.0)))


def _causal_linear(state_dtype):
    """A float16 causal linear attention whose running sums are held in ``state_dtype``."""

    def fn(Q, K, V):
        fq = elu1(Q).astype(np.float16).astype(state_dtype)
        fk = elu1(K).astype(np.float16).astype(state_dtype)
        V = np.asarray(V, np.float16).astype(state_dtype)
        S = np.cumsum(fk[:, :, None] * V[:, None, :], axis=0, dtype=state_dtype)
        z = np.cumsum(fk, axis=0, dtype=state_dtype)
        with np.errstate(all="ignore"):
            out = np.einsum("nd,nde->ne", fq, S) / (fq * z).sum(-1, keepdims=True)
        return out.astype(np.float16)

    return fn


def _inputs(n=1200, d=4):
    """Modest features, values about 20: the sums reach about 1e5 > float16's 65504."""
    rng = np.random.default_rng(0)
    Q, K = 0.5 * rng.standard_normal((2, n, d))
    V = 20.0 + rng.random((n, d))
    return Q, K, V


def _float16_case(state_dtype, inputs, **options):
    """The one case of a float16 verification of the causal linear layer on ``inputs``."""
    report = verify.attention(
        _causal_linear(state_dtype), feature_map=elu1, causal=True, dtype="float16",
        inputs=inputs, check_causality=False, **options,
    )  # fmt: skip
    (case,) = report.cases
    return case


def test_a_float32_state_is_judged_beyond_float16s_range():
    case = _float16_case(np.float32, _inputs())
    assert case.passed is True, case.note


def test_a_declared_16_bit_accumulation_skips_the_case_as_a_test_of_the_format():
    case = _float16_case(np.float32, _inputs(), accumulate="float16")
    assert case.passed is None
    assert "the values the layer accumulates reach" in case.note
    assert "float16's largest number" in case.note


def test_an_undeclared_float16_state_overflows_and_fails():
    case = _float16_case(np.float16, _inputs())
    assert case.passed is False


def test_stored_values_beyond_the_storage_format_skip_the_case():
    Q, K, V = _inputs(n=16)
    case = _float16_case(np.float32, (Q, K, 2000.0 * V))
    assert case.passed is None
    assert "the values the layer stores reach" in case.note


@pytest.mark.parametrize("n", [7, 64])
def test_the_default_cases_still_pass_in_float16(n):
    report = verify.attention(
        _causal_linear(np.float32), feature_map=elu1, causal=True, dtype="float16", n=n
    )
    assert report.passed, report.details()
