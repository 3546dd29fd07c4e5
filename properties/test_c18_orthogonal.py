"""C18: orthogonal random features stay unbiased and do not raise the MSE.

The construction (Haar orthogonal blocks, chi_d row norms) makes every row
exactly N(0, I_d) marginally; this is tested on the drawn rows themselves,
not only through kernel estimates.

Statistics.  Row tests: for a fixed position k in the block, rows from
independent blocks are i.i.d., so three Kolmogorov-Smirnov tests apply per
position -- norms against chi(d), the direction's first coordinate
``u_1`` against its law on the sphere (``(u_1 + 1)/2 ~ Beta((d-1)/2, (d-1)/2)``),
and ``w . e`` (e a fixed unit vector) against N(0, 1) -- each at level
``1e-3 / (3 d)`` (Bonferroni), so a correct construction fails an example
with probability <= 1e-3.  Power: with 2000 blocks the KS test detects a
CDF distance of 0.055 with probability > 0.99; unit-norm rows (distance 0.5
or more from chi(d)) are rejected, as the negative control shows.
MSE: the empirical MSE of orthogonal features must not exceed the i.i.d.
closed form by more than its simultaneous (alpha = 1e-3) interval half-width,
and the report (Holm at 1e-3) must find no bias; a correct construction fails
an example with probability about 1e-3 (6e-3 for the six examples of a run).
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from kernelcheck._src.features.base import draw_projection
from kernelcheck._src.features.random import ESTIMATORS
from kernelcheck.kernels import Exponential
from kernelcheck.verify import unbiased

BLOCKS = 2000


def _row_pvalues(W: np.ndarray, d: int, rng) -> list[float]:
    """KS p-values for rows W (blocks, d, d) at each in-block position."""
    e = rng.standard_normal(d)
    e /= np.linalg.norm(e)
    out = []
    for k in range(d):
        rows = W[:, k, :]
        norms = np.linalg.norm(rows, axis=1)
        out.append(sps.kstest(norms, sps.chi(d).cdf).pvalue)
        out.append(sps.kstest(rows @ e, sps.norm.cdf).pvalue)
        if d >= 2:
            u1 = (rows / norms[:, None]) @ e
            beta = sps.beta((d - 1) / 2, (d - 1) / 2)
            out.append(sps.kstest((u1 + 1) / 2, beta.cdf).pvalue)
    return out


@settings(max_examples=6)
@given(seed=st.integers(0, 2**31 - 1), d=st.integers(2, 8))
def test_c18_orthogonal_rows_are_exactly_gaussian(seed, d):
    """C18: each row of an orthogonal block is N(0, I_d): chi norms, uniform directions."""
    rng = np.random.default_rng(seed)
    W = draw_projection(rng, d, d, orthogonal=True, batch=BLOCKS)
    p = _row_pvalues(W, d, rng)
    assert min(p) > 1e-3 / len(p), p
    # and the rows of a block are mutually orthogonal
    G = W @ np.swapaxes(W, 1, 2)
    off = G - np.einsum("bii->bi", G)[:, :, None] * np.eye(d)
    assert np.max(np.abs(off)) <= 1e-12 * np.max(np.abs(G))


def test_c18_unit_norm_rows_are_rejected():
    """Negative control: the same tests reject orthogonal rows left at unit norm."""
    rng = np.random.default_rng(0)
    d = 4
    W = draw_projection(rng, d, d, orthogonal=True, batch=BLOCKS)
    W_unit = W / np.linalg.norm(W, axis=2, keepdims=True)
    p = _row_pvalues(W_unit, d, rng)
    assert min(p) < 1e-10


@settings(max_examples=6)
@given(
    seed=st.integers(0, 2**31 - 1),
    name=st.sampled_from(sorted(ESTIMATORS)),
    d=st.integers(2, 6),
    blocks=st.integers(1, 3),
)
def test_c18_orthogonal_is_unbiased_and_not_noisier(seed, name, d, blocks):
    """C18: orthogonal features pass the unbiasedness report; MSE <= i.i.d. closed form."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((3, d))
    X *= 0.4 / np.linalg.norm(X, axis=1, keepdims=True)
    Y = rng.standard_normal((3, d))
    Y *= 0.4 / np.linalg.norm(Y, axis=1, keepdims=True)
    sampler = ESTIMATORS[name].sampler(d, d * blocks, orthogonal=True)
    rep = unbiased(sampler, Exponential(), X, Y, trials=20000, seed=seed, alpha=1e-3)
    # no bias found; a pair may be untestable (sample-kurtosis gate), but few are
    assert rep.verdict != "fail", rep.to_markdown()
    assert rep.counts["untestable"] <= len(rep.pairs) // 2, rep.to_markdown()
    for p in rep.pairs:
        if p.verdict != "untestable":
            assert p.mse <= p.theory_mse + p.mse_halfwidth, str(p)
