"""Bad-input rows of verify.random_feature_attention and its testing twin.

Every row raises :class:`InvalidArgument` naming the argument before any
redraw is run (the layer of the rows counts its calls: a row whose argument is
checked late would call it).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from kernelcheck import testing as T
from kernelcheck import verify
from kernelcheck.errors import InvalidArgument
from kernelcheck.kernels import Linear

CALLS: list = []


def layer(Q, K, V, m, rng):
    """Positive random features of exp(q . k), counting its calls."""
    CALLS.append(m)
    W = rng.standard_normal((m, Q.shape[1]))
    fq = np.exp(Q @ W.T - (Q * Q).sum(1, keepdims=True) / 2)
    fk = np.exp(K @ W.T - (K * K).sum(1, keepdims=True) / 2)
    return (fq @ (fk.T @ V)) / (fq @ fk.sum(0))[:, None]


Q = 0.3 * np.eye(2)
K = 0.3 * np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
V = np.arange(6.0).reshape(3, 2)
RFA = verify.random_feature_attention


def rfa(**kw):
    args = dict(fn=layer, Q=Q, K=K, V=V, trials=10, seed=0)
    args.update(kw)
    return lambda: RFA(args.pop("fn"), args.pop("Q"), args.pop("K"), args.pop("V"), **args)


BAD = [
    ("fn", rfa(fn=3), r"^`fn` must be callable"),
    ("Q-nan", rfa(Q=np.array([[np.nan, 0.0]])), r"^`Q` "),
    ("K-dim", rfa(K=np.ones((3, 3))), r"^`K` must have d = 2"),
    ("V-rows", rfa(V=np.ones((2, 2))), r"^`V` must have one row per row of `K`"),
    ("kernel", rfa(kernel="softmax"), r"^`kernel` must be a kernelcheck Kernel"),
    ("ms-few", rfa(num_features=(8, 16)), r"^`num_features` must list at least three"),
    ("ms-repeat", rfa(num_features=(8, 8, 16)), r"^`num_features` must list at least three"),
    ("ms-str", rfa(num_features="8,16,32"), r"^`num_features` must be a sequence"),
    ("ms-zero", rfa(num_features=(0, 8, 16)), r"^`num_features` must be >= 1"),
    ("trials", rfa(trials=1), r"^`trials` must be >= 2"),
    ("alpha", rfa(alpha=1.5), r"^`alpha` "),
    ("power", rfa(power=0.0), r"^`power` "),
    ("causal", rfa(causal="yes"), r"^`causal` must be True or False"),
    ("causal-shape", rfa(causal=True), r"^causal attention needs as many queries as keys"),
    ("seed", rfa(seed="x"), r"^`seed` "),
    (
        "twin-allow",
        lambda: T.assert_random_feature_attention(
            layer, Q, K, V, trials=10, seed=0, allow_inconclusive=1
        ),
        r"^`allow_inconclusive` must be True or False",
    ),
    (
        "twin-trials",
        lambda: T.assert_random_feature_attention(layer, Q, K, V, trials=0, seed=0),
        r"^`trials` must be >= 2",
    ),
]


@pytest.mark.parametrize("call, message", [row[1:] for row in BAD], ids=[row[0] for row in BAD])
def test_bad_input_is_refused_before_any_redraw(call, message):
    CALLS.clear()
    with pytest.raises(InvalidArgument) as info:
        call()
    assert re.search(message, str(info.value)), str(info.value)
    assert CALLS == []


def _wrong_shape(Q, K, V, m, rng):
    return np.zeros((Q.shape[0], V.shape[1] + 1))


def _nan(Q, K, V, m, rng):
    return np.full((Q.shape[0], V.shape[1]), np.nan)


def _raises(Q, K, V, m, rng):
    raise RuntimeError("no GPU")


@pytest.mark.parametrize(
    "fn, message",
    [
        (_wrong_shape, r"^`fn` at m = 16 must return real values of shape \(2, 2\)"),
        (_nan, r"^`fn` at m = 16 returned NaN or Inf"),
        (_raises, r"^`fn` at m = 16 raised RuntimeError: no GPU"),
    ],
)
def test_a_broken_layer_fails_at_the_first_call_with_a_clear_message(fn, message):
    with pytest.raises(InvalidArgument, match=message):
        RFA(fn, Q, K, V, trials=10, seed=0)


def test_a_layer_that_writes_into_its_inputs_does_not_change_the_callers_arrays():
    def writes(Q_, K_, V_, m, rng):
        out = layer(Q_, K_, V_, m, rng)
        Q_[:] = 7.0
        V_[:] = -1.0
        return out

    q, v = Q.copy(), V.copy()
    RFA(writes, q, K, v, trials=10, seed=0, num_features=(2, 3, 4))
    assert np.array_equal(q, Q) and np.array_equal(v, V)


def test_a_non_exponential_target_has_no_relative_variance():
    r = RFA(layer, Q, K, V, kernel=Linear(), trials=10, seed=0, num_features=(2, 3, 4))
    assert np.isnan(r.relative_variance)
