"""verify.ratio_bias gives no verdict from an exact ratio (claim C16).

On inputs whose attention output is the same in every trial (one key,
identical keys, ``V`` equal over the keys) or varies only by rounding,
``ratio_bias`` refuses with a reason instead of fitting rounding and failing;
the rounding bound behind the refusal holds on every trial of an exact ratio.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck import verify
from kernelcheck.errors import InvalidArgument, NumericalFailure
from kernelcheck.features import (
    PositiveRandomFeatures,
)

#: Queries, keys and values of a few tokens (their ratio is not exact)
_RB = np.random.default_rng(16)
RB_Q, RB_K, RB_V = _RB.normal(size=(3, 2)), _RB.normal(size=(5, 2)), _RB.normal(size=(5, 2))

RATIO_BIAS_NO_FIT = {
    "one-key": ((RB_Q, RB_K[:1], RB_V[:1]), InvalidArgument, r"same in every trial \(one key\)"),
    "identical-keys": ((RB_Q, np.repeat(RB_K[:1], 5, 0), RB_V), InvalidArgument, "identical keys"),
    "V-equal-over-keys": ((RB_Q, RB_K, np.ones((5, 2))), InvalidArgument, "`V` equal over"),
    "V-equal-but-an-ulp": (
        (RB_Q, RB_K, 1.0 + np.spacing(1.0) * np.arange(10.0).reshape(5, 2)),
        NumericalFailure,
        r"at m = 4 vary between trials only by rounding",
    ),
    "grouped-keys-equal-means": (
        (RB_Q, RB_K[[0, 0, 1]], np.array([[1.0, 2.0], [3.0, 4.0], [2.0, 3.0]])),
        NumericalFailure,
        "only by rounding",
    ),
}


@pytest.mark.parametrize("name", sorted(RATIO_BIAS_NO_FIT))
def test_ratio_bias_gives_no_verdict_from_an_exact_ratio(name):
    (q, k, v), error, message = RATIO_BIAS_NO_FIT[name]
    with pytest.raises(error, match=message):
        verify.ratio_bias(
            PositiveRandomFeatures.sampler(2, 4),
            q,
            k,
            v,
            num_features=(4, 8, 16),
            trials=400,
            seed=1,
        )


@pytest.mark.parametrize("name", ["identical-keys", "grouped-keys-equal-means"])
def test_the_rounding_bound_of_ratio_bias_holds_where_the_ratio_is_exact(name):
    """Every trial's output of an exact ratio (the value mean of the keys, whatever the
    features) is within output_rounding of it: the model behind the refusal is sound."""
    from kernelcheck._src.verify.random_features.ratio_bias import AttentionTrials, output_rounding

    (q, k, v), _, _ = RATIO_BIAS_NO_FIT[name]
    exact = v.mean(axis=0) if name == "identical-keys" else np.array([2.0, 3.0])
    for m in (4, 64):
        s = PositiveRandomFeatures.sampler(2, m)
        out = AttentionTrials(s, q, k, v, np.ones(q.shape[0] * v.shape[1]))(
            np.random.default_rng(m), 50
        )
        err = np.abs(out[:, :-1] - np.tile(exact, q.shape[0])).max()
        assert err <= output_rounding(v, k.shape[0], m, q.shape[1])
