"""The default cases of ``verify.attention`` reach a layer's structure: blocks, state.

Layers work in blocks of 64 or 128 keys or tokens; a bug at a block
boundary, in a partial last block or in the state carried between blocks is
invisible on inputs shorter than one block.  The default call has a case of
``ACROSS_BLOCKS`` tokens (a multiple of no block size) and compares the
final state on every case; each test below plants such a bug in a layer that
is correct otherwise, and checks the default call fails it while the
correct layer passes.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck import verify
from kernelcheck._src.verify.attention.cases import ACROSS_BLOCKS, CASES
from kernelcheck.attention import State, gated_chunked

BLOCK = 64


def flash_softmax(rescale: bool):
    """Causal softmax over blocks of 64 keys with an online maximum (flash-attention style).

    ``rescale=False`` is the bug: the accumulator and the row sums are not
    rescaled when a later block raises the running maximum.
    """

    def layer(Q, K, V):
        n, d = Q.shape[-2], Q.shape[-1]
        s = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d)
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
        m = np.full(Q.shape[:-1] + (1,), -np.inf)
        acc = np.zeros(Q.shape[:-1] + V.shape[-1:])
        den = np.zeros(Q.shape[:-1] + (1,))
        for j0 in range(0, n, BLOCK):
            blk = s[..., j0 : j0 + BLOCK]
            m_new = np.maximum(m, blk.max(axis=-1, keepdims=True))
            scale = np.exp(m - m_new) if rescale else np.where(np.isfinite(m), 1.0, 0.0)
            p = np.exp(blk - m_new)
            acc = acc * scale + p @ V[..., j0 : j0 + BLOCK, :]
            den = den * scale + p.sum(axis=-1, keepdims=True)
            m = m_new
        return acc / den

    return layer


def test_a_flash_softmax_that_forgets_to_rescale_between_blocks_fails_the_default_call():
    assert verify.attention(flash_softmax(True), causal=True).passed
    report = verify.attention(flash_softmax(False), causal=True)
    assert not report.passed
    failed = {c.name for c in report.failures()}
    assert "across blocks" in failed and "random" not in failed  # the short cases miss it


def elu1(X):
    X = np.asarray(X, dtype=np.float64)
    return np.where(X > 0, X + 1.0, np.exp(np.minimum(X, 0.0)))


def gated_layer(bug: str):
    """Gated linear attention in chunks of 64 tokens with a state; ``bug`` plants one error.

    ``"mask"``: the first token of every chunk after the first does not see
    itself (a mask off by one at each chunk boundary); ``"partial"``: the
    state after a partial last chunk decays by the gates of a full chunk (the
    missing gates taken as the last one).
    """

    def layer(Q, K, V, g, initial_state=None):
        pq, pk = elu1(Q), elu1(K)
        n = Q.shape[-2]
        out, state = gated_chunked(pq, pk, V, g, chunk_size=BLOCK, initial_state=initial_state,
                                   return_state=True)  # fmt: skip
        if bug == "mask":
            for t in range(BLOCK, n, BLOCK):
                out[..., t, :] -= (pq[..., t, :] * pk[..., t, :]).sum(-1, keepdims=True) * V[
                    ..., t, :
                ]
        if bug == "partial" and n % BLOCK:
            missing = BLOCK - n % BLOCK
            state = State(state.S * g[..., -1, None, None] ** missing, None)
        return out, state

    return layer


def _gates(rng, shape):
    return rng.uniform(0.9, 1.0, size=shape)


@pytest.mark.parametrize("bug", ["mask", "partial"])
def test_chunk_boundary_and_partial_chunk_bugs_fail_the_default_call(bug):
    # n = 64: the "random" case is one full chunk, as a call that checks the state
    # of one case only would see it
    kw = dict(feature_map=elu1, normalize=False, causal=True, decay=_gates, state=True, n=BLOCK)
    assert verify.attention(gated_layer("none"), **kw).passed
    report = verify.attention(gated_layer(bug), **kw)
    assert not report.passed
    failed = {c.name for c in report.failures()}
    if bug == "mask":
        assert "across blocks" in failed
    else:  # only the final state is off, and only where n is not a multiple of 64
        assert {"final state (across blocks)", "final state (odd length)"} <= failed
        assert "final state (random)" not in failed and "random" not in failed


def test_the_long_case_crosses_every_common_block_size_and_is_a_multiple_of_none():
    assert "across blocks" in CASES
    assert ACROSS_BLOCKS > 128 and all(ACROSS_BLOCKS % b for b in (16, 32, 64, 128))


def clamped_gates_layer(floor: float):
    """A gated layer that clamps its gates below at ``floor`` (a log-safety habit)."""

    def layer(Q, K, V, g):
        return gated_chunked(elu1(Q), elu1(K), V, np.maximum(g, floor), chunk_size=16)

    return layer


def test_gates_near_zero_are_a_case_of_their_own():
    """Gates clamped at 1e-3 agree with the exact ones on ordinary gates, not near 0."""
    kw = dict(feature_map=elu1, normalize=False, causal=True, decay=_gates)
    assert verify.attention(clamped_gates_layer(0.0), **kw).passed
    report = verify.attention(clamped_gates_layer(1e-3), **kw)
    failed = {c.name for c in report.failures()}
    assert failed == {"random, gates near 0"} | {
        name for name in failed if name.startswith("final state")
    }
    assert "random, gates near 1" in {c.name for c in report.cases}


def test_positive_values_are_uniform_and_move_with_the_keys():
    """The values of the positive-values case: uniform on (0.5, 1.5) channel by channel
    (Kolmogorov-Smirnov, 4096 tokens: a 1e-3 test), tokens independent given the draw's
    directions, each channel correlated with its token's key (the gradients' power)."""
    from scipy import stats

    from kernelcheck._src.verify.attention.cases import VALUE_NOISE, generate_cases

    rng = np.random.default_rng(7)
    c = generate_cases(rng, 4096, 8, 3, (), fixed_d=False, names=("positive values",))[0]
    assert c.V.shape == (4096, 3) and (c.V > 0.5).all() and (c.V < 1.5).all()
    for m in range(3):
        assert stats.kstest(c.V[:, m] - 0.5, "uniform").pvalue > 1e-3
        # the channel is 0.5 + Phi(z), z = (a . x + c e) / sqrt(1 + c^2): regress z on x
        z = stats.norm.ppf(c.V[:, m] - 0.5)
        x = c.K / (0.5 / np.sqrt(8))
        a, *_ = np.linalg.lstsq(x, z, rcond=None)
        share = 1.0 / np.sqrt(1.0 + VALUE_NOISE**2)
        assert abs(np.linalg.norm(a) - share) < 0.05
        assert abs(np.std(z - x @ a) - VALUE_NOISE * share) < 0.05


@pytest.mark.parametrize("name", CASES)
def test_a_case_draws_the_same_inputs_whichever_cases_are_asked_for(name):
    """Drawing stops after the last case asked for: what was drawn is what the full call draws."""
    from kernelcheck._src.verify.attention.cases import generate_cases

    def made(names):
        rng = np.random.default_rng(11)
        return generate_cases(rng, 40, 3, 2, (2,), fixed_d=False, names=names)

    alone = made((name,))[0]
    full = next(c for c in made(CASES) if c.name == name)
    for a, b in zip((alone.Q, alone.K, alone.V), (full.Q, full.K, full.V), strict=True):
        np.testing.assert_array_equal(a, b)
