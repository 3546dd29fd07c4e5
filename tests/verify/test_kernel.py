"""Unit tests of verify.kernel: precision ladder and counterexample search (claims C5, C6).

Each reported violation is re-checked independently: the Gram at the witness
points is re-evaluated in mpmath at 50 digits and ``v^T G v`` must be negative
there beyond that evaluation's rounding.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import mpmath
import numpy as np
import pytest

import kernelcheck as kc
from kernelcheck import InvalidArgument
from kernelcheck._src.verify.kernel import KernelReport, assert_kernel
from kernelcheck.verify import kernel as verify_kernel
from tests import catalog


def independently_negative(k, P, v):
    """v^T G v < 0 with G evaluated by the kernel's mp function at 50 digits."""
    with mpmath.workdps(50):
        G = k.gram_mp(P, dps=50)
        vm = [mpmath.mpf(float(x)) for x in v]
        n = len(vm)
        q = mpmath.fsum(vm[i] * G[i, j] * vm[j] for i in range(n) for j in range(n))
        scale = mpmath.fsum(abs(vm[i] * G[i, j] * vm[j]) for i in range(n) for j in range(n))
        return q < -scale * mpmath.mpf(10) ** -40


@pytest.mark.parametrize("dim", [1, 2, 3])
def test_search_finds_non_kernels(non_kernel, dim):
    k = non_kernel
    rep = verify_kernel(k, dim=dim, budget=8, seed=1)
    assert isinstance(rep, KernelReport)
    assert rep.verdict == "violation" and not rep.passed
    assert rep.points.shape[1] == dim
    assert independently_negative(k, rep.points, rep.witness)
    assert "restarts" in rep.budget


def test_search_never_flags_true_kernels(psd_kernel):
    k = psd_kernel
    rep = verify_kernel(k, dim=2, budget=8, seed=2)
    assert rep.passed and rep.verdict == "no_counterexample", str(rep)


def test_result_does_not_depend_on_the_executor():
    k = catalog.kernel("exp(-||x - y||^4)")
    serial = verify_kernel(k, dim=1, budget=8, seed=5)
    with ThreadPoolExecutor(max_workers=2) as ex:
        parallel = verify_kernel(k, dim=1, budget=8, seed=5, executor=ex)
    assert serial.to_dict() == parallel.to_dict()
    t = verify_kernel(kc.Laplacian(1.0), dim=1, budget=4, seed=5)
    with ThreadPoolExecutor(max_workers=2) as ex:
        tp = verify_kernel(kc.Laplacian(1.0), dim=1, budget=4, seed=5, executor=ex)
    assert t.to_dict() == tp.to_dict()


def test_ladder_calls_rank_deficient_linear_gram_rounding():
    X = np.random.default_rng(0).standard_normal((20, 2))
    rep = verify_kernel(kc.Linear(), X)
    assert rep.passed and rep.verdict in ("rounding", "psd")
    if rep.verdict == "rounding":
        # the float64 value was negative and the high-precision ones are not below -bound
        assert rep.ladder[0][1] < 0 and rep.shrinks()


def test_ladder_calls_a_real_violation_real():
    k = catalog.kernel("cos(x.y)")
    X = np.array([[0.0], [1.3], [1.7]])
    rep = verify_kernel(k, X)
    assert rep.verdict == "violation" and not rep.passed
    values = [v for _, v in rep.ladder[1:]]
    assert values[-1] < 0 and abs(values[-1] - values[-2]) <= 1e-3 * abs(values[-1])
    assert independently_negative(k, X, rep.witness)


def test_kernel_without_mp_falls_back_to_float_verdict():
    k = kc.kernel_from_function(lambda x, y: float(np.tanh(x @ y - 1.0)), name="tanh")
    rep = verify_kernel(k, np.array([[0.1], [0.2]]))
    assert rep.verdict == "violation" and "no rounding-error model" in rep.reason
    assert rep.ladder[0][0] == "float64"


def test_points_mode_passes_gram_of_true_kernel():
    X = np.random.default_rng(3).standard_normal((6, 3))
    rep = verify_kernel(kc.Gaussian(1.0), X)
    assert rep.passed and rep.psd is not None and rep.psd.certified


BAD = [
    (dict(X=None), "dim"),
    (dict(X=None, dim=0), "dim"),
    (dict(X=None, dim=2, budget=0), "budget"),
    (dict(X=None, dim=2, seed=-1), "seed"),
    (dict(X=None, dim=2, seed=1.5), "seed"),
    (dict(X=np.ones(3)), "X"),
    (dict(X=np.ones((3, 2)), dim=3), "dim"),
    (dict(X=np.array([[np.nan, 0.0]])), "finite"),
]


@pytest.mark.parametrize("kwargs, word", BAD)
def test_bad_input(kwargs, word):
    X = kwargs.pop("X")
    with pytest.raises(InvalidArgument) as info:
        verify_kernel(kc.Linear(), X, **kwargs)
    assert word in str(info.value)


def test_bad_kernel():
    with pytest.raises(InvalidArgument, match="kernel"):
        verify_kernel(3.0, np.eye(2))


def test_assert_kernel_message():
    k = catalog.kernel("-||x - y||")
    with pytest.raises(AssertionError) as info:
        assert_kernel(k, np.array([[0.0], [1.0]]))
    msg = str(info.value)
    for word in (
        "violation",
        "points (2 x 1)",
        "witness v",
        "by precision",
        "tolerance on lambda_min",
    ):
        assert word in msg
    assert assert_kernel(kc.Linear(), np.eye(2)).passed


def test_hypothesis_exploration_is_opt_in_and_finds_a_non_kernel():
    """explore="hypothesis": Hypothesis-targeted starting sets; a clear violation is found."""
    neg = kc.kernel_from_function(lambda X, Y: -np.linalg.norm(X - Y, axis=-1), vectorized=True)
    rep = verify_kernel(neg, dim=2, budget=8, explore="hypothesis")
    assert rep.verdict == "violation" and not rep.passed


def test_seeded_search_is_reproducible_across_processes():
    """The default exploration draws only from the seed: a fresh interpreter agrees."""
    import json
    import subprocess
    import sys

    code = (
        "import json;from kernelcheck import verify;from kernelcheck.kernels import Gaussian;"
        "print(json.dumps(verify.kernel(Gaussian(), dim=2, seed=4, budget=8).to_dict()))"
    )
    fresh = json.loads(
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
    )
    here = json.loads(verify_kernel(kc.Gaussian(), dim=2, seed=4, budget=8).to_json())
    assert here == fresh


def test_unknown_exploration_is_refused():
    with pytest.raises(InvalidArgument, match="`explore` must be one of"):
        verify_kernel(kc.Gaussian(), dim=2, explore="random")


def test_search_on_a_kernel_that_always_raises_is_inconclusive_not_a_pass():
    bad = kc.kernel_from_function(lambda x, y: 1 / 0, name="raises")
    rep = verify_kernel(bad, dim=2, budget=8)
    assert rep.verdict == "inconclusive" and not rep.passed
    assert "could not be evaluated" in rep.reason


def test_a_plain_callable_that_raises_on_the_points_is_invalid_argument():
    def broken(X, Y=None):
        raise RuntimeError("boom")

    with pytest.raises(InvalidArgument, match="`kernel` raised RuntimeError"):
        verify_kernel(broken, np.ones((3, 2)))
