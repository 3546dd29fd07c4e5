"""The probabilistic error model only on data drawn at random (``model_for_data``).

Why: Higham and Mary's bound assumes independent, mean-zero rounding errors.  A float32
running sum of a constant sequence repeats the same rounding error at every step of a
binade, so its error grows like ``n u``: here it leaves the probabilistic bound behind
while staying inside the worst-case one, and a sum of independent random terms of the
same size stays inside the probabilistic bound.  ``model_for_data`` therefore gives the
worst case (saying why) to data that was not drawn at random, and exactly the
probabilistic model to data that was.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck._src.core.rounding import (
    PRECISIONS,
    STRUCTURED_DATA,
    RoundingModel,
    gamma,
    model_for_data,
    probabilistic_lambda,
)

F32 = PRECISIONS["float32"]
N = 4096
#: The constant whose float32 running sum errs the most (found by a search over [1, 2)).
WORST_CONSTANT = 1.9191899299621582


def relative_errors_of_running_sums(terms: np.ndarray) -> np.ndarray:
    """``|fl32(s_k) - s_k| / s_k`` for every prefix of ``terms`` (float32 numbers, positive)."""
    computed = np.cumsum(terms.astype(np.float32), dtype=np.float32).astype(np.float64)
    exact = np.cumsum(terms.astype(np.float64))  # exact: float32 terms, n <= 2^29 of them
    return np.abs(computed - exact) / exact


def probabilistic(k, failure=1e-9, terms=N):
    lam = probabilistic_lambda(terms, failure)
    return RoundingModel(F32, F32, lam=lam, failure=failure).gamma(k)


def test_a_constant_sequence_leaves_the_probabilistic_bound_behind():
    """Measured: about n u / 4 on one sum (the output of a normalised layer has two sums,
    one erring up, one down: 0.50 n u); the probabilistic bound of n terms is far below,
    the worst-case gamma_n above."""
    rel = relative_errors_of_running_sums(np.full(N, WORST_CONSTANT))
    k = np.arange(1, N + 1)
    assert rel.max() > 0.24 * N * F32.u
    beyond = rel > np.array([probabilistic(int(j)) for j in k])
    assert beyond.sum() > N // 4  # not one unlucky step: most of the sequence
    assert (rel <= np.array([gamma(int(j), F32) for j in k])).all()


@pytest.mark.parametrize("seed", range(20))
def test_independent_random_terms_stay_inside_the_probabilistic_bound(seed):
    terms = np.random.default_rng(seed).uniform(1.0, 2.0, N).astype(np.float32)
    rel = relative_errors_of_running_sums(terms)
    k = np.arange(1, N + 1)
    assert (rel <= np.array([probabilistic(int(j)) for j in k])).all()


def test_data_not_drawn_at_random_gets_the_worst_case_and_says_why():
    given = model_for_data("float32", "float16", 3, failure=1e-9, terms=1e6, iid=False)
    assert given == RoundingModel(F32, PRECISIONS["float16"], 3, fallback=STRUCTURED_DATA)
    assert given.lam is None and given.failure is None
    for k in (1, 100, 8192):
        assert given.gamma(k) == RoundingModel(F32, PRECISIONS["float16"], 3).gamma(k)
    assert given.describe().startswith(f"accumulate in float32, worst case ({STRUCTURED_DATA})")


def test_random_data_keeps_exactly_the_probabilistic_model():
    drawn = model_for_data("float32", "float16", 3, failure=1e-9, terms=1e6, iid=True)
    lam = probabilistic_lambda(1e6, 1e-9)
    assert drawn == RoundingModel(F32, PRECISIONS["float16"], 3, lam, 1e-9)
    assert drawn.fallback == ""
    # ... which is the tighter of the two wherever k >> lambda^2
    f32 = model_for_data("float32", "float32", failure=1e-9, terms=1e6, iid=True)
    assert f32.gamma(8192) < model_for_data("float32", "float32").gamma(8192) / 10


def test_without_a_failure_probability_the_model_is_the_worst_case_whatever_the_data():
    for iid in (True, False):
        model = model_for_data("float32", "float32", failure=None, iid=iid)
        assert model == RoundingModel(F32, F32)
