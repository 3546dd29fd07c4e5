"""The shortcuts a verification takes with the normwise bound of the transitions (C24), justified.

* A hand-over's handed state is bounded by row ``a - 1`` of the whole
  sequence's bound (:meth:`TransitionSpec.prefix_state_bound`), not by a new
  evaluation on the first ``a`` tokens.  That is sound only because the model
  is causal and grows with n: the row must be at least the prefix's own
  bound, on every kind of transition (decays one per token or per channel,
  gates of exactly 0, expanding transitions, a handed-over state), in
  float64 and in a 16-bit model, at every chunk size.
* Inside a verification the bound's pieces are memoized
  (:mod:`~kernelcheck._src.core.memo`): a memoized bound must equal the one
  computed afresh, an input changed in place must not hit the old entry,
  and a caller changing the arrays it got must not change the next call's.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck._src.attention.common import transition_bound as tb
from kernelcheck._src.attention.common.transitions import Transitions
from kernelcheck._src.core import memo
from kernelcheck._src.core.rounding import RoundingModel, precision

N, D, DV = 150, 6, 3


def _kind(kind: str, rng) -> Transitions:
    q, k = rng.standard_normal((2, N, D))
    k /= np.linalg.norm(k, axis=-1, keepdims=True)
    v = rng.standard_normal((N, DV))
    beta = rng.uniform(0.1, 1.0, (N, 1))
    if kind == "delta":
        return Transitions(q, k, beta * v, -beta * k)
    if kind == "expanding":  # beta |k|^2 up to 2.2: some transitions stretch
        beta = rng.uniform(1.5, 2.2, (N, 1))
        return Transitions(q, k, beta * v, -beta * k)
    if kind == "gated":
        return Transitions(q, k, beta * v, -beta * k, None, np.log(rng.uniform(0.5, 1.0, (N, 1))))
    if kind == "per-channel, gates of 0":
        lw = np.log(rng.uniform(0.3, 1.0, (N, D)))
        lw[::17, 2] = -np.inf
        return Transitions(q, k, beta * v, -beta * k, None, lw)
    # diagonal plus rank one with a write of its own (RWKV-7)
    a = rng.standard_normal((N, D)) * 0.3
    return Transitions(q, k, v, a, -0.5 * a, np.log(rng.uniform(0.5, 1.0, (N, D))))


KINDS = ["delta", "expanding", "gated", "per-channel, gates of 0", "dplr"]
F32 = np.dtype(np.float32)
BF16 = RoundingModel(precision("float32"), precision("bfloat16"), storage_ops=2)


@pytest.mark.parametrize("chunk", [1, 16, 64])
@pytest.mark.parametrize("kind", KINDS)
def test_the_whole_sequences_bound_at_a_cut_covers_the_prefixs_own(kind, chunk):
    rng = np.random.default_rng(KINDS.index(kind) + 10 * chunk)
    T = _kind(kind, rng)
    S0 = rng.standard_normal((D, DV))
    whole = tb.transitions_bound(T, S0, BF16, chunk_size=chunk)
    checked = 0
    for a in (1, 2, 37, 64, 65, N // 2, N - 2, N - 1):
        part = Transitions(*(None if x is None else x[:a] for x in T))
        prefix = tb.transitions_bound(part, S0, BF16, chunk_size=chunk)
        for w, p in zip(whole, prefix, strict=True):
            row, own = w.state[a - 1], p.state[-1]
            assert own.shape == row.shape
            ok = np.isfinite(row)
            assert (row[ok] >= own[ok]).all(), (a, float((own[ok] / row[ok]).max()))
            assert (~np.isfinite(own) <= ~ok).all()  # an unbounded prefix is unbounded there too
            checked += int(ok.sum())
    assert checked > 0  # the comparison was made


def test_a_memoized_bound_is_the_bound_computed_afresh():
    rng = np.random.default_rng(1)
    T, S0 = _kind("gated", rng), rng.standard_normal((D, DV))
    fresh = tb.transitions_bound(T, S0, BF16)
    with memo.memo_scope():
        first = tb.transitions_bound(T, S0, BF16)
        first[1].out[...] = 0.0  # the caller's own copy: the memo is not changed
        again = tb.transitions_bound(T, S0, BF16)
    for f, a in zip(fresh, again, strict=True):
        for x, y in zip(f, a, strict=True):
            assert np.array_equal(x, y)


def test_the_memo_keys_by_content_and_computes_once_per_key():
    calls = []

    def compute():
        calls.append(1)
        return np.ones(3)

    x = np.arange(4.0)
    with memo.memo_scope():
        memo.memoized(("k", memo.digest(x)), compute)
        memo.memoized(("k", memo.digest(x.copy())), compute)  # equal content: kept
        assert len(calls) == 1
        x[0] = -1.0  # changed in place: a new key
        memo.memoized(("k", memo.digest(x)), compute)
        assert len(calls) == 2
        assert memo.digest(np.zeros(2)) != memo.digest(np.zeros((2, 1)))  # shape is content
        assert memo.digest(np.zeros(2)) != memo.digest(np.zeros(2, np.float32))
    memo.memoized(("k", memo.digest(x)), compute)  # outside a scope: nothing kept
    assert len(calls) == 3


def test_the_memo_keeps_recent_entries_within_its_budget(monkeypatch):
    monkeypatch.setattr(memo, "BUDGET", 3 * 800)  # three arrays of 100 float64
    made = []

    def make(i):
        made.append(i)
        return np.full(100, float(i))

    with memo.memo_scope():
        for i in range(5):
            memo.memoized(("a", i), lambda i=i: make(i))
        memo.memoized(("a", 4), lambda: make(4))  # the newest three are kept
        memo.memoized(("a", 2), lambda: make(2))
        assert made == [0, 1, 2, 3, 4]
        memo.memoized(("a", 0), lambda: make(0))  # evicted: computed again
        assert made == [0, 1, 2, 3, 4, 0]


@pytest.mark.parametrize("family", ["delta", "gated_delta", "kda", "dplr"])
def test_a_specs_prefix_state_bound_covers_the_prefix_run_alone(family):
    """What the hand-over check reads (:meth:`prefix_state_bound`) against the state bound of
    the first ``a`` tokens computed on their own, for every transition family."""
    from kernelcheck._src.attention.common.spec import SpecOptions
    from kernelcheck._src.attention.registry import FAMILIES, get_family

    fam = get_family(family)
    spec = fam.spec(SpecOptions(causal=True, normalize=False, flags={"qk_l2norm": True}))
    rng = np.random.default_rng(5)
    n, d = 90, 5
    q, k, v = rng.standard_normal((3, n, d))
    record = next(f for f in FAMILIES if f.name == family)
    tokens = []
    for ti in record.token_inputs:
        shape = (n, d) if ti.width == "D" else (n,)
        tokens.append(np.asarray(ti.sample(rng, shape), dtype=np.float64))
    args = (q, k, v, *tokens)
    compared = 0
    for a in (1, 30, 64, 65, 88):
        read = spec.prefix_state_bound(args, F32, a)
        own = spec.state_bound(spec.take_arguments(args, 0, a), F32, a)
        ok = np.isfinite(read)  # RWKV-7's default factors expand: no bound late in the sequence
        assert (read[ok] >= own[ok]).all(), (family, a)
        compared += bool(ok.any())
    assert compared >= 2
