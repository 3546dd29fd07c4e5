"""What is peculiar to kernelized attention, the weights of a kernel (claims C10, C12).

``kernelized`` with the exponential kernel is softmax attention; with a
kernel's exact feature map it is linear attention (against the brute-force
formula of :mod:`tests.attention.formulas`); its bound is the formula of its
docstring; a kernel that is not one, or misbehaves (raises, returns the wrong
shape, NaN, complex or strings), is refused by name; a kernel whose
normalisers are <= 0 (``Linear()``) is reported (C12), and one that overflows
is a ``NumericalFailure``.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck import attention as att
from kernelcheck._src.core.rounding import gamma, unit_roundoff
from kernelcheck.errors import BadNormalizer, InvalidArgument, NumericalFailure
from kernelcheck.kernels import Exponential, Linear, Polynomial, kernel_from_function
from tests.attention.formulas import brute_linear, quotient_bound
from tests.attention.inputs import K, Q, V, gram_of

RNG = np.random.default_rng(7)
U = unit_roundoff(np.float64)
ETA = float(np.finfo(np.float64).smallest_subnormal)


def _rng(seed=0):
    return np.random.default_rng(seed)


def test_softmax_equals_kernelized_exponential():
    """C10: exp(q.k / sqrt d) is the kernel Exponential(1/sqrt(d))."""
    rng = _rng(5)
    Q, K, V = rng.normal(size=(3, 2, 9, 4))
    for causal in (False, True):
        a = att.softmax(Q, K, V, causal=causal)
        k = Exponential(0.5)
        b = att.kernelized(Q, K, V, k, causal=causal)
        tol = att.softmax_error_bound(Q, K, V, causal=causal) + att.kernelized_error_bound(
            Q, K, V, k, causal=causal
        )
        assert (np.abs(a - b) <= tol).all()


def test_kernelized_matches_feature_form():
    rng = _rng(11)
    Q, K, V = rng.normal(size=(3, 8, 3)) * 0.5
    k = Polynomial(2, c=1.0)
    phi = k.features()
    for causal in (False, True):
        a = att.kernelized(Q, K, V, k, causal=causal)
        ref, _ = brute_linear(phi(Q), phi(K), V, causal)
        tol = att.kernelized_error_bound(Q, K, V, k, causal=causal) + att.linear_error_bound(
            phi(Q), phi(K), V, causal=causal, extra_ops=2 * phi.ops
        )
        assert (np.abs(a - ref) <= tol).all()


def test_kernelized_rejects_wrong_gram_shape():
    with pytest.raises(InvalidArgument, match="Gram block"):
        att.kernelized(
            np.ones((3, 2)), np.ones((3, 2)), np.ones((3, 1)), lambda X, Y: np.ones((2, 2))
        )


def test_kernelized_linear_kernel_bad_normaliser():
    Q = np.array([[1.0], [-1.0]])
    with pytest.raises(BadNormalizer, match="C12"):
        att.kernelized(Q, Q, np.ones((2, 1)), Linear())


def test_linear_kernel_normalisers_reported_by_kernelized():
    Q = np.array([[1.0], [-1.0]])
    res = att.kernelized(Q, Q, np.ones((2, 1)), Linear(), on_bad_normalizer="report")
    # normalisers: q_i (k_1 + k_2) = 0 for both rows
    assert res.bad_positions.tolist() == [[0], [1]]
    assert np.array_equal(res.normalizer, [0.0, 0.0])


# ---------------------------------------------------------------------------
# Bad input: kernels that are not kernels, or misbehave
# ---------------------------------------------------------------------------


#: kernelized and its bound: the kernel a user passes (id, call, error, message regex)
KERNELIZED_BAD = [
    (
        "kernelized-kernel-not-callable",
        lambda: att.kernelized(Q, K, V, 3),
        InvalidArgument,
        r"^`kernel` must be callable, got int 3",
    ),
    (
        "kernelized-kernel-raises",
        lambda: att.kernelized(Q, K, V, lambda X, Y: 1 / 0),
        InvalidArgument,
        r"^`kernel` raised ZeroDivisionError: division by zero",
    ),
    (
        "kernelized-kernel-shape",
        lambda: att.kernelized(Q, K, V, lambda X, Y: np.ones(3)),
        InvalidArgument,
        r"^`kernel` returned a Gram block of shape \(3,\) for inputs of shapes \(5, 3\) and "
        r"\(5, 3\); expected \(5, 5\)",
    ),
    (
        "kernelized-kernel-none",
        lambda: att.kernelized(Q, K, V, lambda X, Y: None),
        InvalidArgument,
        r"^`kernel` returned a Gram block of shape \(\)",
    ),
    (
        "kernelized-kernel-nan",
        lambda: att.kernelized(Q, K, V, gram_of(lambda n, m: np.full((n, m), np.nan))),
        InvalidArgument,
        r"^`kernel` returned a non-finite value .*nan.* at entry \(0, 0\)",
    ),
    (
        "kernelized-kernel-inf-causal",
        lambda: att.kernelized(
            Q, K, V, gram_of(lambda n, m: np.where(np.eye(n, m) > 0, np.inf, 1)), causal=True
        ),
        InvalidArgument,
        r"^`kernel` returned a non-finite value .*inf.* at entry \(0, 0\)",
    ),
    (
        "kernelized-kernel-complex",
        lambda: att.kernelized(Q, K, V, gram_of(lambda n, m: np.ones((n, m)) + 1j)),
        InvalidArgument,
        r"^`kernel` returned array of shape \(5, 5\) and dtype complex128; expected real",
    ),
    (
        "kernelized-kernel-strings",
        lambda: att.kernelized(Q, K, V, gram_of(lambda n, m: np.full((n, m), "a"))),
        InvalidArgument,
        r"^`kernel` returned array of shape \(5, 5\) and dtype <U1; expected real numbers",
    ),
    (
        "kernelized-action",
        lambda: att.kernelized(Q, K, V, Linear(), on_bad_normalizer="eps"),
        InvalidArgument,
        r"^`on_bad_normalizer` must be one of 'raise', 'report'; got 'eps'",
    ),
    (
        "kernelized-function-kernel-raises",
        lambda: att.kernelized(Q, K, V, kernel_from_function(lambda x, y: 1 / 0)),
        InvalidArgument,
        r"^`f` \(<lambda>\) raised ZeroDivisionError",
    ),
    (
        "keb-extra-neg",
        lambda: att.kernelized_error_bound(Q, K, V, Exponential(), extra_ops=-2),
        InvalidArgument,
        r"^`extra_ops` must be >= 0, got -2",
    ),
    (
        "keb-dtype-f16",
        lambda: att.kernelized_error_bound(Q, K, V, Exponential(), dtype="float16"),
        InvalidArgument,
        r"^`dtype` must be float64 or float32, got float16",
    ),
    (
        "keb-no-error-bound",
        lambda: att.kernelized_error_bound(Q, K, V, lambda X, Y: X @ Y.T),
        InvalidArgument,
        r"^`kernel` must provide error_bound\(X, Y\) for an error model, got function",
    ),
    (
        "keb-function-kernel",
        lambda: att.kernelized_error_bound(Q, K, V, kernel_from_function(lambda x, y: 1.0)),
        InvalidArgument,
        r"^`kernel` kernel_from_function\(<lambda>\) has no rounding-error model",
    ),
    (
        "keb-not-callable",
        lambda: att.kernelized_error_bound(Q, K, V, "exp"),
        InvalidArgument,
        r"^`kernel` must be callable, got str 'exp'",
    ),
]


@pytest.mark.parametrize(
    "call, error, message", [c[1:] for c in KERNELIZED_BAD], ids=[c[0] for c in KERNELIZED_BAD]
)
def test_bad_input_table(call, error, message):
    """Each row raises the expected clean error, its message matched from the start."""
    with pytest.raises(error, match=message):
        call()


# ---------------------------------------------------------------------------
# Extreme values
# ---------------------------------------------------------------------------


def test_kernelized_overflowing_kernel_is_a_clean_error():
    with pytest.raises(NumericalFailure, match=r"^Exponential\(\) overflows float64"):
        att.kernelized(np.full((2, 2), 30.0), np.full((2, 2), 30.0), np.ones((2, 1)), Exponential())


@pytest.mark.parametrize("causal", [False, True])
def test_kernelized_error_bound_is_the_docstring_formula(causal):
    n, d, dv = 5, 2, 2
    Q, K = RNG.normal(size=(2, n, d))
    V = RNG.normal(size=(n, dv))
    k = Polynomial(2, c=1.0)
    G = k(Q, K)
    EG = k.error_bound(Q, K)
    if causal:
        G, EG = np.tril(G), np.tril(EG)
    W = np.hstack([V, np.ones((n, 1))])
    absH = np.abs(G) @ np.abs(W)
    EGW = EG @ np.abs(W)
    g64 = gamma(n + 2)
    E = (EGW + gamma(n + 1) * absH) * (1 + g64) + n * ETA * (1 + np.abs(W).max())
    expected = quotient_bound(absH * (1 + g64) + EGW * (1 + g64), E, (G @ W)[:, -1], roundings=1)
    got = att.kernelized_error_bound(Q, K, V, k, causal=causal)
    assert np.allclose(got, expected, rtol=1e3 * U, atol=0)
    # the bound holds: kernelized against an exact evaluation of the Gram block
    exact = np.array(k.gram_mp(Q, K, dps=40).tolist(), dtype=float)
    if causal:
        exact = np.tril(exact)
    ref = (exact @ V) / exact.sum(axis=1, keepdims=True)
    assert np.all(np.abs(att.kernelized(Q, K, V, k, causal=causal) - ref) <= got)


def test_kernelized_error_bound_lower_precision_and_extra_ops_grow_it():
    Q, K = RNG.normal(size=(2, 5, 2))
    V = RNG.normal(size=(5, 1))
    k = Exponential(0.5)
    base = att.kernelized_error_bound(Q, K, V, k)
    assert np.all(att.kernelized_error_bound(Q, K, V, k, extra_ops=4) > base)
    b32 = att.kernelized_error_bound(Q, K, V, k, dtype=np.float32)
    ratio = unit_roundoff(np.float32) / U
    assert np.all(b32 > 0.5 * ratio * base)


def test_kernelized_error_bound_defaults_are_the_documented_ones():
    Q, K, V = RNG.normal(size=(3, 6, 4))
    k = Exponential(0.5)
    assert np.array_equal(
        att.kernelized_error_bound(Q, K, V, k),
        att.kernelized_error_bound(Q, K, V, k, causal=False, dtype=np.float64, extra_ops=0),
    )


def test_kernelized_causal_mask_is_exact_on_a_structured_example():
    """exp(q . k) with all q . k = 0: causal attention is the running mean of V."""
    n = 6
    V = np.arange(n, dtype=float)[:, None]
    Q = K = np.zeros((n, 2))
    expected = np.cumsum(V, axis=0) / np.arange(1, n + 1)[:, None]
    got = att.kernelized(Q, K, V, Exponential(), causal=True)
    assert np.allclose(got, expected, rtol=8 * U, atol=0)


def test_a_single_token_is_its_own_value_exactly():
    """One token: its kernel weight divided by itself, exactly 1."""
    one, v = np.array([[0.7]]), np.array([[3.0, -1.0]])
    for causal in (False, True):
        assert np.array_equal(att.kernelized(one, one, v, Exponential(), causal=causal), v)


def test_bad_normalizer_message_names_the_form():
    phi = np.array([[1.0], [-1.0]])
    with pytest.raises(BadNormalizer, match=r"normalisers are <= 0 in `kernelized` \(first at"):
        att.kernelized(phi, phi, np.ones((2, 1)), Linear())
