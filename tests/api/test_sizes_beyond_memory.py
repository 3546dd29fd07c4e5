"""Sizes beyond memory are refused before the allocation, saying how much they would need.

Every size-scaling argument of the public API (states, trials, Gram blocks,
PSD working copies, random features and their estimates, orthogonal draws) is
called in a child process whose address space is limited to 6 GiB: each must be
refused with ``InvalidArgument`` naming the memory it would need, never answered
and never a ``MemoryError``.
"""

from __future__ import annotations

#: size-scaling arguments: each must be refused up front, saying the memory it would need
SIZE_CASES = {
    "attention.linear_recurrence-init-D": "attention.linear_recurrence().init(10**5, 10**5)",
    "attention.linear_recurrence-init-batch": (
        "attention.linear_recurrence().init(3, 2, batch_shape=(10**5, 10**5))"
    ),
    "run_trials": "stats.run_trials(lambda rng, c: rng.normal(size=(c, 2)), 10**15, seed=0)",
    "check_psd-broadcast": "psd.check_psd(np.broadcast_to(np.eye(1), (50000, 50000)))",
    "gram": "Gaussian()(np.broadcast_to(np.zeros((1, 2)), (10**5, 2)))",
    "verify.unbiased": (
        "verify.unbiased(PositiveRandomFeatures.sampler(2, 16), Exponential(),"
        " np.zeros((50000, 2)), trials=10, seed=0)"
    ),
    "random-features": "PositiveRandomFeatures(2, 10**9, seed=0)(np.zeros((4, 2)))",
    # a projection that fits, applied to points whose feature matrix does not
    "random-features-rows": "PositiveRandomFeatures(2, 10**5, seed=0)(np.zeros((10**5, 2)))",
    "random-features-log_features": (
        "PositiveRandomFeatures(2, 10**5, seed=0).log_features(np.zeros((10**5, 2)))"
    ),
    "optimal-random-features-rows": (
        "OptimalPositiveRandomFeatures(2, 10**5, seed=0)(np.zeros((10**5, 2)))"
    ),
    "hyperbolic-random-features-log_features": (
        "HyperbolicRandomFeatures(2, 10**5, seed=0).log_features(np.zeros((10**5, 2)))"
    ),
    # small maps, results of one entry per pair of 10^5 points
    "random-features-estimate": (
        "PositiveRandomFeatures(2, 4, seed=0).estimate(np.zeros((10**5, 2)))"
    ),
    "trigonometric-estimate": (
        "TrigonometricRandomFeatures(2, 4, seed=0).estimate(np.zeros((10**5, 2)))"
    ),
    "random-features-theory": "PositiveRandomFeatures(2, 4, seed=0).theory(np.zeros((10**5, 2)))",
    "random-features-mse": (
        "PositiveRandomFeatures(2, 4, seed=0).theoretical_mse(np.zeros((10**5, 2)))"
    ),
    "sampler-estimates": (
        "PositiveRandomFeatures.sampler(2, 4).batch_estimates(0, 10**4, np.zeros((3000, 2)))"
    ),
    "sampler-features-of-a-trial": (
        "PositiveRandomFeatures.sampler(2, 10**7).batch_estimates(0, 2, np.zeros((3000, 2)))"
    ),
    # an orthogonal draw whose one copy fits and whose working copies do not
    "orthogonal-random-features": (
        "PositiveRandomFeatures(16, 16 * 10**6, seed=0, orthogonal=True)"
    ),
}

SIZE_CHILD = """
import resource, sys, numpy as np
resource.setrlimit(resource.RLIMIT_AS, (6 * 1024**3, 6 * 1024**3))
from kernelcheck import attention, psd, stats, verify
from kernelcheck.errors import InvalidArgument
from kernelcheck.features import (
    HyperbolicRandomFeatures,
    OptimalPositiveRandomFeatures,
    PositiveRandomFeatures,
    TrigonometricRandomFeatures,
)
from kernelcheck.kernels import Exponential, Gaussian
for name, code in CASES.items():
    try:
        eval(code)
        print(name, "ANSWERED")
    except InvalidArgument as exc:
        print(name, "REFUSED", " ".join(str(exc).split()))
    except BaseException as exc:
        print(name, "BARE", type(exc).__name__)
"""


def test_size_scaling_arguments_are_refused_up_front_under_a_6_gib_address_space_limit():
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    code = f"CASES = {SIZE_CASES!r}\n{SIZE_CHILD}"
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    assert set(lines) == set(SIZE_CASES), proc.stderr[-2000:]
    for name, outcome in lines.items():
        assert outcome.startswith("REFUSED") and "would need" in outcome, (name, outcome)
        assert "GiB" in outcome, (name, outcome)
