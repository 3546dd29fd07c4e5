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
from kernelcheck._src.verify.kernels.kernel import KernelReport
from kernelcheck._src.verify.kernels.precision import rounding_reason
from kernelcheck.testing import assert_kernel
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
        # the float Gram's lambda_min was negative; its eigenvector's quotient in float64 is
        # negative or not (that depends on the machine's BLAS), and >= 0 at high precision
        assert rep.min_eigenvalue < 0 and rep.shrinks()
        assert rep.ladder[-1][1] >= -1e-25 * abs(rep.min_eigenvalue)
        assert rep.reason == rounding_reason(
            rep.min_eigenvalue, rep.ladder[0][1], rep.ladder[-1][0], rep.ladder[-1][1]
        )


def test_rounding_reason_says_whether_the_float64_quotient_was_negative():
    below = rounding_reason(-3e-15, -2e-16, "dps=60", 1e-30)
    assert "(witness value -2e-16), which shrinks with precision (dps=60: 1e-30)" in below
    above = rounding_reason(-3e-15, 1.3e-16, "dps=60", 1e-30)
    assert "quotient is 1.3e-16 >= 0 in float64 and 1e-30 at dps=60" in above
    assert "shrinks" not in above


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

    # refused before any work, with what each reading raised and the fix
    with pytest.raises(InvalidArgument, match="it raised RuntimeError: boom") as info:
        verify_kernel(broken, np.ones((3, 2)))
    assert "kernel_from_function(f, blocks=True)" in str(info.value)


# ---------------------------------------------------------------------------
# the kernels users have: asymmetric Grams, plain functions, error bounds, domains
# ---------------------------------------------------------------------------


def _asymmetric(A, B):
    """``exp(A B^T)`` with a 1e-9 asymmetry: a bug-level asymmetry, not rounding."""
    G = np.exp(A @ B.T)
    if G.shape[0] == G.shape[1] and G.shape[0] > 1:
        G[0, 1] += 1e-9
    return G


def test_symmetrize_is_an_option_of_verify_kernel():
    """C5: a Gram asymmetric beyond rounding level is refused naming ``symmetrize=True``;
    with it the exact symmetric part is judged and the report says so."""
    X = np.linspace(-1, 1, 6).reshape(3, 2)
    k = kc.kernel_from_function(_asymmetric, blocks=True)
    with pytest.raises(InvalidArgument, match="pass symmetrize=True"):
        verify_kernel(k, X)
    rep = verify_kernel(k, X, symmetrize=True)
    assert rep.passed and rep.psd.symmetrized and "(K + K^T)/2" in rep.psd.reason


def test_a_plain_function_of_two_point_sets_is_judged_with_a_note():
    """C5: ``lambda A, B: exp(A B^T)`` (a Gram written as a function of two point sets) is read as
    ``kernel_from_function(f, blocks=True)``, says so, and passes; a non-kernel written
    the same way is caught by the search."""
    rep = verify_kernel(lambda A, B: np.exp(A @ B.T), dim=3, budget=8)
    assert rep.passed and "blocks=True" in rep.reason
    bad = verify_kernel(lambda A, B: -np.abs(A[:, None, 0] - B[None, :, 0]), dim=1, budget=8)
    assert bad.verdict == "violation" and "plain function" in bad.reason


def test_search_reports_the_first_error_of_a_kernel_that_always_raises():
    """C5: a kernel that cannot be evaluated anywhere is inconclusive and the reason
    carries the real error, not only "could not be evaluated"."""
    bad = kc.kernel_from_function(lambda x, y: 1 / 0, name="raises")
    rep = verify_kernel(bad, dim=2, budget=8)
    assert rep.verdict == "inconclusive" and "ZeroDivisionError" in rep.reason


def test_error_bound_makes_a_user_kernel_a_target_with_its_own_tolerance():
    """C5: ``kernel_from_function(f, error_bound=...)`` gives the kernel an error model:
    ``error_bound`` returns it, and verify.kernel's tolerance is its Frobenius norm plus
    the float resolution."""
    X = np.linspace(-1, 1, 8).reshape(4, 2)
    for eb in (1e-12, lambda A, B: np.full((A.shape[0], B.shape[0]), 1e-12)):
        k = kc.kernel_from_function(lambda A, B: np.exp(A @ B.T), blocks=True, error_bound=eb)
        assert np.array_equal(k.error_bound(X), np.full((4, 4), 1e-12))
        rep = verify_kernel(k, X)
        assert rep.passed and rep.tol.value >= 4 * 1e-12 and "error_bound" in rep.tol.source


@pytest.mark.parametrize(
    "kwargs, text",
    [
        ({"error_bound": -1.0}, "`error_bound` must be >= 0"),
        ({"error_bound": float("nan")}, "`error_bound`"),
        ({"error_bound": lambda A, B: np.ones(3)}, "must return a real array of shape (4, 4)"),
        ({"error_bound": lambda A, B: -np.ones((4, 4))}, "finite bounds >= 0"),
        ({"vectorized": True, "blocks": True}, "exclude each other"),
    ],
)
def test_error_bound_bad_input(kwargs, text):
    X = np.zeros((4, 2))

    def make():
        k = kc.kernel_from_function(lambda A, B: A @ B.T, **kwargs)
        return k.error_bound(X)

    with pytest.raises(InvalidArgument) as info:
        make()
    assert text in str(info.value)


def test_domain_restricts_the_search():
    """C5: the Hilbert kernel ``1 / (x + y + 1)`` is a kernel on ``x > -1/2`` (searched
    there: no counterexample, every point inside) but not on the whole line (its Gram
    has a pole and changes sign); a sampler domain draws the points."""

    def hilbert(A, B):
        return 1.0 / (A[:, None, 0] + B[None, :, 0] + 1.0)

    rep = verify_kernel(hilbert, dim=1, budget=8, domain=(-0.5, np.inf))
    assert rep.passed and rep.verdict == "no_counterexample" and (rep.points > -0.5).all()
    assert "in the box (-0.5, inf)" in rep.budget
    assert not verify_kernel(hilbert, dim=1, budget=16).passed

    def sampler(rng, n):
        return rng.uniform(0.1, 2.0, size=(n, 1))

    rep = verify_kernel(hilbert, dim=1, budget=4, domain=sampler)
    assert rep.passed and (rep.points >= 0.1).all() and "sampler" in rep.budget


@pytest.mark.parametrize(
    "domain, text",
    [
        ((1.0, 1.0), "`domain` is empty"),
        ((2.0, 1.0), "`domain` is empty"),
        ((np.inf, np.inf), "`domain` is empty"),
        ((np.nan, 1.0), "`domain` low must not be NaN"),
        (([0.0, 0.0, 0.0], 1.0), "array of length dim = 2"),
        ("box", "`domain` must be a box"),
        ((0.0,), "`domain` must be a box"),
        (lambda rng, n: np.ones((n, 3)), "must return a finite real array of shape"),
        (lambda rng, n: np.full((n, 2), np.nan), "must return a finite real array of shape"),
    ],
)
def test_domain_bad_input(domain, text):
    with pytest.raises(InvalidArgument) as info:
        verify_kernel(kc.Gaussian(), dim=2, budget=1, domain=domain)
    assert text in str(info.value)


def test_domain_is_for_the_search_only():
    with pytest.raises(InvalidArgument, match="`domain` restricts the search"):
        verify_kernel(kc.Gaussian(), np.zeros((2, 2)), domain=(0, 1))


@pytest.mark.parametrize("d", [1, 5, 50])
def test_linear_kernel_passes_at_every_rank(d):
    """C5: ``verify.kernel(Linear(), X)`` passes for rank-deficient Grams (n = 300 > d),
    decided and certified at every rank."""
    X = np.random.default_rng(d).standard_normal((300, d))
    rep = verify_kernel(kc.Linear(), X)
    assert rep.passed and rep.verdict == "psd" and rep.psd.certified


@pytest.mark.parametrize(
    "k",
    [kc.Linear(), kc.Polynomial(2), kc.exp(kc.Linear(), order=3), kc.Gaussian()],
    ids=repr,
)
def test_common_kernels_are_decided_certified_at_n_300(k):
    """C5: the Grams of the essay's kernels (rank-deficient for the first three at
    n = 300 points in R^5) are decided PSD and certified, never inconclusive."""
    X = np.random.default_rng(0).standard_normal((300, 5)) / np.sqrt(5)
    rep = verify_kernel(k, X)
    assert rep.passed and rep.psd.certified and rep.psd.is_psd


def test_shrinks_counts_a_float64_quotient_already_nonnegative_only_if_it_stays_so():
    def report(*values):
        ladder = tuple(zip(("float64", "dps=30", "dps=60"), values, strict=False))
        return KernelReport(True, "rounding", "k", "points", ladder=ladder)

    assert report(-2e-16, -1e-20, 1e-30).shrinks()  # moved toward >= 0
    assert report(1.3e-16, 1e-30, 1e-30).shrinks()  # >= 0 throughout
    assert not report(1.3e-16, -1e-3, -1e-3).shrinks()  # moved below 0
    assert not report(-1e-3, -1e-3, -1e-3).shrinks()  # stays negative
    assert report(-1e-3).shrinks() is None  # no ladder
