"""The causality check of ``verify.attention`` reuses the case's reference and tolerance.

Perturbing token ``j`` cannot change a causal reference's outputs before
``j``, and the tolerance there is a bound computed from the unperturbed case
that covers the perturbed run's first ``j`` rows too (see
``attention_checks.causality_check``).  These tests check that
justification on every causal reference family, that no reference is computed
per perturbation (the saving), and that leaks are still caught and located.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck import verify
from kernelcheck._src.attention.registry import get_family
from kernelcheck._src.core.rounding import RoundingModel, precision
from kernelcheck._src.verify.adapters import round_to
from kernelcheck._src.verify.attention.reference import Reference
from kernelcheck.kernels import Polynomial


def elu1(X):
    X = np.asarray(X, dtype=np.float64)
    return np.where(X > 0, X + 1.0, np.exp(np.minimum(X, 0.0)))


def _models():
    f32, f16 = precision("float32"), precision("float16")
    return {
        "float32": (RoundingModel(f32, f32), f32),
        "float16 storage": (RoundingModel(f32, f16, get_family("softmax").storage_ops), f16),
    }


REFERENCES = {
    "softmax": lambda: Reference.of(causal=True),
    "linear": lambda: Reference.of(causal=True, feature_map=elu1),
    "kernelized": lambda: Reference.of(causal=True, kernel=Polynomial(2)),
}


def _perturb(Q, K, V, j, rng, p):
    """The causality check's perturbation of token j."""
    Q2, K2, V2 = Q.copy(), K.copy(), V.copy()
    Q2[..., j, :] = round_to(-2.0 * Q[..., j, :] + rng.standard_normal(Q.shape[-1]), p)
    K2[..., j, :] = round_to(-2.0 * K[..., j, :] + rng.standard_normal(K.shape[-1]), p)
    V2[..., j, :] = round_to(V[..., j, :] + 5.0, p)
    return Q2, K2, V2


@pytest.mark.parametrize("family", sorted(REFERENCES))
@pytest.mark.parametrize("which", sorted(_models()))
def test_prefix_reference_and_bound_cover_the_perturbed_run(family, which):
    """Before token j, the perturbed case's reference is the original's, and so is the room.

    The bound of the perturbed run's first j rows, computed from those rows
    alone (all a causal layer reads for them), is at most the unperturbed
    case's tolerance there; and the reference there is the same.
    """
    model, p = _models()[which]
    ref = REFERENCES[family]()
    rng = np.random.default_rng(3)
    n, d = 40, 4
    Q, K, V = (round_to(rng.standard_normal((2, n, d)), p) for _ in range(3))
    if family == "kernelized":
        Q, K = Q / 2, K / 2
    args, kw = ref.args(Q, K, V, {})
    out0 = ref.output(args, kw)
    tol0 = ref.tolerance(args, kw, model, 0, out0, d)
    for j in (1, 7, 20, n - 1):
        Q2, K2, V2 = _perturb(Q, K, V, j, rng, p)
        args2, kw2 = ref.args(Q2[..., :j, :], K2[..., :j, :], V2[..., :j, :], {})
        out2 = ref.output(args2, kw2)
        tol2 = ref.tolerance(args2, kw2, model, 0, out2, d)
        assert np.all(tol2 <= tol0[..., :j, :])
        assert np.all(np.abs(out2 - out0[..., :j, :]) <= tol0[..., :j, :] - tol2)


def test_the_causality_check_computes_no_reference_per_perturbation():
    """The feature map runs for the judged case only, not once more per perturbed token."""
    calls = []

    def phi(X):
        calls.append(X.shape)
        return elu1(X)

    def layer(Q, K, V):
        fq, fk = elu1(Q), elu1(K)
        A = np.tril(fq @ np.swapaxes(fk, -1, -2))
        return (A @ V) / A.sum(-1, keepdims=True)

    runs = []
    for check in (False, True):
        calls.clear()
        report = verify.attention(
            layer, feature_map=phi, causal=True, n=30, cases=("random",), check_causality=check
        )
        assert report.passed, report.details()
        runs.append(len(calls))
    assert runs[0] == runs[1] == 2  # phi(Q) and phi(K) of the one case


def test_the_causality_check_reuses_the_judged_output():
    """The layer runs once per perturbed token, plus once for the judged case."""
    calls = []

    def layer(Q, K, V):
        calls.append(1)
        fq, fk = elu1(Q), elu1(K)
        A = np.tril(fq @ np.swapaxes(fk, -1, -2))
        return (A @ V) / A.sum(-1, keepdims=True)

    report = verify.attention(layer, feature_map=elu1, causal=True, n=6, cases=("random",))
    assert report.passed, report.details()
    assert len(calls) == 1 + 5  # the case, then tokens 1 .. 5 perturbed one at a time


@pytest.mark.parametrize("k", [1, 3, 17])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_faint_leak_is_caught_with_its_distance(k, dtype):
    """A layer whose output at t reads token t + k (weight 1e-3) is caught, with its k."""

    def leaky(Q, K, V):
        n = Q.shape[-2]
        S = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
        S = np.where(np.tril(np.ones((n, n), bool)), S, -np.inf)
        W = np.exp(S - S.max(-1, keepdims=True))
        out = (W / W.sum(-1, keepdims=True)) @ V
        out[..., : n - k, :] += 1e-3 * V[..., k:, :]
        return out.astype(Q.dtype)

    report = verify.attention(leaky, causal=True, n=64, dtype=dtype, seed=1, cases=("random",))
    leak = next(c for c in report.checks if c.name == "causality")
    assert leak.passed is False
    assert f"depends on token t + {k} " in leak.note


def test_a_correct_causal_layer_passes_the_causality_check_in_float16():
    def layer(Q, K, V):
        Q, K, V = (np.asarray(X, np.float32) for X in (Q, K, V))
        n = Q.shape[-2]
        S = Q @ np.swapaxes(K, -1, -2) / np.float32(np.sqrt(Q.shape[-1]))
        S = np.where(np.tril(np.ones((n, n), bool)), S, -np.inf)
        W = np.exp(S - S.max(-1, keepdims=True))
        return ((W / W.sum(-1, keepdims=True)) @ V).astype(np.float16)

    for seed in range(3):
        report = verify.attention(layer, causal=True, n=50, dtype="float16", seed=seed)
        check = next(c for c in report.checks if c.name == "causality")
        assert check.passed, report.details()
