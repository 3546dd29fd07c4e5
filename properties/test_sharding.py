"""C13, C16, C17: Monte Carlo reports are the same on 1, 2 and 8 shards for the same seed.

The Monte Carlo engine behind :func:`kernelcheck.verify.unbiased` seeds each
block of ``shard_size`` trials with the k-th ``SeedSequence.spawn`` child of
the root seed and merges the blocks' moments (count, mean, M2..M4, the
rounding-scale maximum) with the exact pairwise update in block order.  A
shard is only a group of consecutive blocks handed to an executor as one
task, so splitting the same run into 1, 2 or 8 shards -- or running it
in-process, where there is no executor -- must give the same report, byte for
byte (``to_json``), whatever order the tasks finish in.  The properties
relate two computations of the same report; nothing here is statistical
(no false-alarm rate: a single differing bit fails).  The C13 estimate
(Performer positive features, its mean and z test) and the C17 quantities
(closed-form variance ratio, MSE, the MSE sweep over m) are all fields of the
compared report; the C16 ratio-bias report (attention outputs over several
m) is compared the same way.  The executor is a pool of 2 threads: the grouping and the
merge are what is tested; processes and a Dask cluster run the same code in
``tests/mc/test_distributed.py``.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import assume, given, reject, settings
from hypothesis import strategies as st

from kernelcheck.errors import NumericalFailure
from kernelcheck.features import PositiveRandomFeatures
from kernelcheck.kernels import Exponential
from kernelcheck.stats import run_trials
from kernelcheck.strategies import point_sets
from kernelcheck.verify import ratio_bias, unbiased
from tests import catalog

SHARDS = (1, 2, 8)
#: The random feature maps of the catalogue (tests/catalog.py).
RANDOM_MAPS = [e.cls for e in catalog.feature_maps(catalog.is_random_map)]


@pytest.fixture(scope="module")
def pool():
    with ThreadPoolExecutor(2) as ex:
        yield ex


def _lognormal_trials(rng, n):
    """C13 in one dimension: exp(s Z - s^2/2), Z ~ N(0, 1), has mean exactly 1."""
    s = np.array([0.25, 0.5, 1.0])
    z = rng.standard_normal((n, 3))
    values = np.exp(s * z - s * s / 2)
    return values, np.abs(values)


def _same_bytes(a, b) -> bool:
    fields = ("mean", "m2", "m3", "m4", "maximum")
    return a.count == b.count and all(
        getattr(a, f).tobytes() == getattr(b, f).tobytes() for f in fields
    )


@settings(max_examples=12, deadline=None)
@given(
    X=point_sets(min_points=1, max_points=3, dim=3, max_norm=0.8),
    Y=point_sets(min_points=1, max_points=2, dim=3, max_norm=0.8),
    estimator=st.sampled_from(RANDOM_MAPS),
    orthogonal=st.booleans(),
    seed=st.integers(0, 2**63 - 1),
    trials=st.integers(2, 12_000),
    shard_size=st.integers(64, 3000),
)
def test_c13_c17_report_identical_on_1_2_8_shards(
    pool, X, Y, estimator, orthogonal, seed, trials, shard_size
):
    """C13, C17: the report (bias tests, variances, MSE sweep) on 1, 2, 8 shards and in-process."""
    sampler = estimator.sampler(3, 8, orthogonal=orthogonal)

    def report(executor=None, shards=None):
        return unbiased(
            sampler,
            Exponential(),
            X,
            Y,
            trials=trials,
            seed=seed,
            shard_size=shard_size,
            executor=executor,
            shards=shards,
            sweep=(4, 16),
        ).to_json()

    reference = report()
    for shards in SHARDS:
        assert report(pool, shards) == reference, f"{shards} shards"


@settings(max_examples=8, deadline=None)
@given(
    Q=point_sets(min_points=1, max_points=3, dim=3, max_norm=0.6),
    # two or more keys: with one key the output is exactly v (no bias to fit)
    K=point_sets(min_points=2, max_points=3, dim=3, max_norm=0.6),
    seed=st.integers(0, 2**63 - 1),
    trials=st.integers(500, 4000),
    shard_size=st.integers(64, 1000),
)
def test_c16_ratio_bias_report_identical_on_1_2_8_shards(pool, Q, K, seed, trials, shard_size):
    """C16: the ratio-bias report (biases, 1/m fit) on 1, 2, 8 shards and in-process."""
    # identical keys make the output exact (no bias to fit; ratio_bias refuses it)
    assume(len(np.unique(K, axis=0)) >= 2)
    V = np.random.default_rng(seed).standard_normal((K.shape[0], 2))
    sampler = PositiveRandomFeatures.sampler(3, 8)

    def report(executor=None, shards=None):
        return ratio_bias(
            sampler,
            Q,
            K,
            V,
            num_features=(4, 8, 16),
            trials=trials,
            seed=seed,
            shard_size=shard_size,
            executor=executor,
            shards=shards,
        ).to_json()

    try:
        reference = report()
    except NumericalFailure:
        # keys a few ulp apart (or a dominating key) leave no bias above rounding:
        # ratio_bias refuses such inputs by design, which tests/verify checks
        reject()
    for shards in SHARDS:
        assert report(pool, shards) == reference, f"{shards} shards"


@given(
    seed=st.integers(0, 2**63 - 1),
    trials=st.integers(2, 20_000),
    shard_size=st.integers(1, 4096),
    shards=st.integers(1, 64),
)
def test_c13_moments_identical_for_any_grouping_of_the_blocks(
    pool, seed, trials, shard_size, shards
):
    """C13: the engine's moments for any number of shards equal the in-process moments."""
    if trials // shard_size > 200:  # keep each example short: at most ~200 blocks
        shard_size = -(-trials // 200)
    reference = run_trials(_lognormal_trials, trials, seed=seed, shard_size=shard_size)
    for s in (*SHARDS, shards):
        got = run_trials(
            _lognormal_trials, trials, seed=seed, shard_size=shard_size, executor=pool, shards=s
        )
        assert _same_bytes(got, reference), f"{s} shards"


def test_c13_the_comparison_sees_a_different_stream():
    """C13 negative control: the byte comparison above is not vacuous.

    Another seed, or another block size (which fixes the random stream), gives
    different moments; only the grouping of blocks into shards may not matter.
    """
    a = run_trials(_lognormal_trials, 5000, seed=1, shard_size=500)
    assert not _same_bytes(a, run_trials(_lognormal_trials, 5000, seed=2, shard_size=500))
    assert not _same_bytes(a, run_trials(_lognormal_trials, 5000, seed=1, shard_size=501))
