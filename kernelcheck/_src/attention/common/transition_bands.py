"""The float64 quantities the transitions' error model reads, computed for speed (claim C24).

:mod:`~kernelcheck._src.attention.common.transition_bound` bounds a
recurrence of transitions by windows of C tokens; what it reads of the
inputs is computed here, every entry rounded upward:

* the band entries of every chunk's matrices (:class:`Bands`), with one
  decay for every channel as block products of C rows by their 2C-token
  window, else token by token, and their sums against the bound's terms
  (:func:`lag_sum`, one matrix product per block);
* the float64 recurrence's state norms and checkpoints (:func:`state_norms`),
  which the reverse pass of the gradients reuses;
* non-negative linear recurrences by blocks (:func:`upward_scan`).

Each function states its rounding and the factor that covers it; tests
compare each with its token-by-token definition in extended precision.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from kernelcheck._src.attention.common.blocking import swap
from kernelcheck._src.attention.common.transitions import Transitions, chunk_decays, pair_decay
from kernelcheck._src.core.rounding import gamma, unit_roundoff

__all__ = [
    "STATE_BLOCK",
    "Bands",
    "ForwardStates",
    "band_blocks",
    "bands",
    "block_lags",
    "chained",
    "lag_blocks",
    "lag_sum",
    "state_norms",
    "upward_scan",
]


def chained(a, b):
    """``(1 + a)(1 + b) - 1``: two relative errors in a row."""
    return a + b + a * b


#: Tokens per block of :func:`upward_scan`.
_SCAN_BLOCK = 64


def upward_scan(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``e_t = a_t e_(t-1) + b_t`` (``e_(-1) = 0``) for ``a >= 0`` (..., n), ``b >= 0`` (..., n, m).

    By blocks of :data:`_SCAN_BLOCK` tokens: every block's own recurrence
    from 0 and its running products, all blocks at once; the values entering
    each block carried across the blocks; then ``e = own + products *
    entering``.  Each ``e_t`` is a sum of non-negative terms, ``b_j`` times
    the ``a`` between: evaluated so, each term takes at most ``n`` factors'
    roundings plus two per block crossed, and each sum at most ``n + n / B``
    additions, within ``gamma_(4n+4)`` relative, which is added (upward).
    A value beyond the float range is ``inf`` or NaN, as in the token loop.
    """
    n, m = b.shape[-2], b.shape[-1]
    B = _SCAN_BLOCK
    nb = -(-n // B)
    lead = np.broadcast_shapes(a.shape[:-1], b.shape[:-2])
    A = np.zeros(lead + (nb * B,))
    A[..., :n] = a
    Bv = np.zeros(lead + (nb * B, m))
    Bv[..., :n, :] = b
    A, Bv = A.reshape(lead + (nb, B)), Bv.reshape(lead + (nb, B, m))
    own = np.empty_like(Bv)
    with np.errstate(over="ignore", invalid="ignore"):
        prev = np.zeros(lead + (nb, m))
        for i in range(B):
            prev = A[..., i, None] * prev + Bv[..., i, :]
            own[..., i, :] = prev
        prods = np.cumprod(A, axis=-1)
        entering = np.empty(lead + (nb, m))
        carry = np.zeros(lead + (m,))
        for blk in range(nb):
            entering[..., blk, :] = carry
            carry = prods[..., blk, B - 1, None] * carry + own[..., blk, B - 1, :]
        e = own + prods[..., None] * entering[..., None, :]
    e = e.reshape(lead + (nb * B, m))[..., :n, :]
    return e * (1.0 + gamma(4 * n + 4))


class Bands(NamedTuple):
    """Every chunk's matrices at once: entry ``[..., t, l]`` is row t, column ``j = t - l``.

    A chunk of at most C tokens starting anywhere holds, for ``t - C < j < t``,
    exactly these entries (an entry of the inverse of a unit lower triangular
    matrix depends only on the rows and columns between its own), so sums
    over the band bound every chunk's sums.  Computed in float64 and rounded
    upward (see :func:`band_blocks`).
    """

    A: np.ndarray  # |A_tj| = |r_t . D_(t-1<-j) p_j| (decays only), lags 1..C-1 (lag 0 unused)
    Abar: np.ndarray  # sum_c |r_tc| |p_jc| D_c: the rounding of forming A_tj
    Linv: np.ndarray  # |(I - A)^(-1)_tj| = |r_t . M_(t-1) ... M_(j+1) p_j|
    Aq: np.ndarray  # sum_c |q_tc| |p_jc| D_(t<-j),c, lags 0..C-1: the outputs' products


def bands(T: Transitions, mags, C: int) -> Bands:
    """The band entries of :class:`Bands` (upward), row by lag (see :func:`band_blocks`)."""
    n = T.q.shape[-2]
    return Bands(*(block_lags(X, n) for X in band_blocks(T, mags, C)))


def band_blocks(T: Transitions, mags, C: int) -> Bands:
    """The bands of :class:`Bands` as the lag sums' blocks (:func:`lag_blocks`), upward.

    ``A``, ``Abar`` and ``Aq`` are products of ``r``, ``q`` and ``p`` with
    the decays between: with one decay for every channel (or none) they are
    block products (:func:`_one_decay_products`), else ``p_j`` is decayed
    token by token (:func:`_decayed_products`).  ``Linv`` propagates every
    ``p_j`` through the transitions (:func:`_reads_through`; ``mags`` are
    the bound's per-token magnitudes, of which ``rho``, ``r`` and ``p`` are
    read).  The factor ``1 + gamma_(D+C+4)`` covers the sums of the norms'
    products.  ``Aq``'s blocks hold lag 0, the others' do not.
    """
    r = T.read
    p = T.k if T.write is None else T.write
    w = np.ones(r.shape[:-1] + (1,)) if T.log_w is None else np.exp(T.log_w)
    n, D = r.shape[-2], r.shape[-1]
    C = min(C, n)
    up = 1.0 + gamma(D + C + 4)
    if T.log_w is None or T.log_w.shape[-1] == 1:
        A, Abar, Aq = _one_decay_products(T, p, C, up)
    else:
        lags = _decayed_products(T, p, w, C)
        A, Abar, Aq = (lag_blocks(X * up, own) for X, own in zip(lags, (False, False, True)))
    Linv = lag_blocks(_reads_through(r, p, w, mags, C) * up, False)
    return Bands(A, Abar, Linv, Aq)


def _decayed_products(T: Transitions, p, w, C: int):
    """``A``, ``Abar``, ``Aq`` of :class:`Bands` by decaying every ``p_j`` token by token.

    ``y_j`` is ``p_j`` decayed; at lag l row ``t = j + l`` reads it.  Each
    computed ``A`` entry is within ``(l + 1) gamma_(D+4)`` of ``Abar`` (the
    decays' products and the dot product), which is added; ``Abar`` and
    ``Aq`` are sums of non-negative products, covered by :func:`band_blocks`'s factor.
    """
    n, D = T.read.shape[-2], T.read.shape[-1]
    lead = _lead(T)
    A, Abar, Aq = (np.zeros(lead + (n, C)) for _ in range(3))
    r, ra, qa = T.read, np.abs(T.read), np.abs(T.q)
    y = np.array(np.broadcast_to(p, lead + p.shape[-2:]))
    ya = np.abs(y)
    Aq[..., 0] = np.vecdot(qa, ya)
    g = gamma(D + 4)
    for lag in range(1, C):
        rows, cols = slice(lag, n), slice(0, n - lag)
        A[..., rows, lag] = np.abs(np.vecdot(r[..., rows, :], y[..., cols, :]))
        Abar[..., rows, lag] = np.vecdot(ra[..., rows, :], ya[..., cols, :])
        wl = w[..., rows, :]
        y[..., cols, :] *= wl
        ya[..., cols, :] *= wl
        Aq[..., rows, lag] = np.vecdot(qa[..., rows, :], ya[..., cols, :])
        A[..., rows, lag] += (lag + 1) * g * Abar[..., rows, lag]
    return A, Abar, Aq


def _one_decay_products(T: Transitions, p, C: int, up: float):
    """``A``, ``Abar``, ``Aq`` for one decay on every channel: block products, as blocks.

    Row t of block b (``t = b C + i``) meets the columns of blocks b - 1 and
    b: ``r_t . p_j``, ``|r_t| . |p_j|`` and ``|q_t| . |p_j|`` are three
    matrix products, and the decays between, ``exp(G_(t-1) - G_j)`` (and
    ``exp(G_t - G_j)`` for ``Aq``), come from the cumulative log decays of
    the 2C tokens of that pair of blocks (a decay of exactly 0 counted apart:
    nothing crosses it).  Rounding: a dot product is within ``gamma_D`` of
    its norms' product; the cumulative sums of ``2 C`` logs, their
    difference and ``exp`` are within ``expm1(4 gamma_(2C+5) L) + 10 u``
    relative (``L`` the pair's total ``|log w|``); with ``c`` the two
    chained, ``A`` gets ``2 c Abar`` added and ``Abar``, ``Aq`` the factor
    ``1 + 2 c``; all three then ``up``.  Returned as :func:`lag_blocks` would
    form them (lag 0 in ``Aq`` only).
    """
    n, D = T.read.shape[-2], T.read.shape[-1]
    nb = -(-n // C)
    Pw = _block_windows(p, C, nb)  # (..., nb, 2C, D)

    def rows(X):  # (..., nb, C, x): the rows of every block, padded
        out = np.zeros(X.shape[:-2] + (nb * C, X.shape[-1]))
        out[..., :n, :] = X
        return out.reshape(X.shape[:-2] + (nb, C, X.shape[-1]))

    R, Ra, Qa = rows(T.read), rows(np.abs(T.read)), rows(np.abs(T.q))
    Pa = np.abs(Pw)
    rp, rpa, qpa = (X @ swap(Y) for X, Y in ((R, Pw), (Ra, Pa), (Qa, Pa)))
    i, c = np.arange(C)[:, None], np.arange(2 * C)[None, :]
    lag = C + i - c  # (C, 2C): the lag of row i and window column c
    in_A, in_q = (lag >= 1) & (lag < C), (lag >= 0) & (lag < C)
    if T.log_w is None:
        dec_A, dec_q = in_A.astype(np.float64), in_q.astype(np.float64)
        rel = np.zeros((1, 1))
    else:
        win = _block_windows(T.log_w[..., 0:1], C, nb)  # (..., nb, 2C, 1), padded with 0
        G, Z = (x[..., 0] for x in chunk_decays(win))
        # E[a, c] = exp(G_(C-1+a) - G_c), 0 across a gate of 0: row i's decays over
        # (j, t - 1] are E[i], over (j, t] E[i + 1]
        E = pair_decay(G[..., C - 1 :, None], Z[..., C - 1 :, None], G[..., None, :],
                       Z[..., None, :])  # fmt: skip
        dec_A, dec_q = np.where(in_A, E[..., :C, :], 0.0), np.where(in_q, E[..., 1:, :], 0.0)
        L = np.sum(np.where(np.isneginf(win), 0.0, np.abs(win)), axis=(-2, -1))
        rel = (np.expm1(4.0 * gamma(2 * C + 5) * L) + 10.0 * unit_roundoff())[..., None, None]
    c2 = 2.0 * chained(gamma(D + 2), rel)
    # the first product of each broadcasts (the decays may have more heads), the rest in place
    Abar = rpa * dec_A
    Abar *= 1.0 + c2
    A = np.abs(rp) * dec_A
    A += c2 * Abar
    A *= up
    Abar *= up
    Aq = qpa * dec_q
    Aq *= (1.0 + c2) * up
    return A, Abar, Aq


def _reads_through(r, p, w, mags, C: int) -> np.ndarray:
    """``Linv`` of :class:`Bands`: every ``p_j`` propagated C - 1 tokens through the transitions.

    ``z_j <- Diag(w) z_j + p (r . z_j)``; at lag l row ``t = j + l`` reads
    ``r_t . z_j``.  Each computed entry is within ``(l + 1) gamma_(D+4)`` of
    the norms' product ``2 |r_t| Lambda |p_j|`` (``mu``-free: the error of
    each step is propagated by the transitions themselves, whose norm the
    propagation also bounds), which is added.
    """
    n, D = r.shape[-2], r.shape[-1]
    lead = np.broadcast_shapes(r.shape[:-2], p.shape[:-2], w.shape[:-2], mags.rho.shape[:-1])
    Linv = np.zeros(lead + (n, C))
    z = np.array(np.broadcast_to(p, lead + p.shape[-2:]))
    # the propagated z_j has grown by at most prod max(1, rho) over its lag
    span = np.exp(np.cumsum(np.log(np.maximum(mags.rho, 1.0)), axis=-1))
    g = gamma(D + 4)
    for lag in range(1, C):
        rows, cols = slice(lag, n), slice(0, n - lag)
        val = np.vecdot(r[..., rows, :], z[..., cols, :])
        Lam = span[..., rows] / np.maximum(span[..., cols], 1e-300)
        slack = (lag + 1) * g * 2.0 * mags.r[..., rows] * Lam * mags.p[..., cols]
        Linv[..., rows, lag] = np.abs(val) + slack
        z[..., cols, :] *= w[..., rows, :]
        z[..., cols, :] += p[..., rows, :] * val[..., None]
    return Linv


def _lead(T: Transitions) -> tuple[int, ...]:
    """The leading (batch, head) shape every array of ``T`` broadcasts to."""
    return np.broadcast_shapes(*(x.shape[:-2] for x in T if x is not None))


def _block_windows(X: np.ndarray, C: int, nb: int) -> np.ndarray:
    """``(..., nb, 2C, x)``: block b's window, rows ``(b - 1) C .. (b + 1) C - 1`` of ``X``.

    Rows outside ``X`` are 0 (a view of one padded copy).
    """
    n = X.shape[-2]
    Xp = np.zeros(X.shape[:-2] + ((nb + 1) * C, X.shape[-1]))
    Xp[..., C : C + n, :] = X
    win = np.lib.stride_tricks.sliding_window_view(Xp, 2 * C, axis=-2)[..., ::C, :, :]
    return swap(win)


def lag_blocks(band: np.ndarray, own: bool) -> np.ndarray:
    """A band ``[..., t, l]`` (lags ``0..C-1``) as ``[..., b, i, c]``: row ``b C + i``, column c.

    Column c of block b's window is token ``(b - 1) C + c`` (:func:`_block_windows`),
    lag ``C + i - c``.  Row i's entries are the band's row reversed and
    shifted by ``i + 1``: written into rows of ``2 C + 1`` and read back in
    rows of ``2 C``.  Lag 0 is left out unless ``own``.
    """
    n, C = band.shape[-2], band.shape[-1]
    nb = -(-n // C)
    Q = np.zeros(band.shape[:-2] + (nb * C, 2 * C + 1))
    Q[..., :n, 1 : C + 1] = band[..., ::-1]
    if not own:
        Q[..., C] = 0.0
    flat = Q.reshape(band.shape[:-2] + (nb, C * (2 * C + 1)))[..., : 2 * C * C]
    return flat.reshape(band.shape[:-2] + (nb, C, 2 * C))


def block_lags(B: np.ndarray, n: int) -> np.ndarray:
    """The inverse of :func:`lag_blocks`: ``[..., b, i, c]`` back to ``[..., t, l]`` (n rows)."""
    nb, C = B.shape[-3], B.shape[-2]
    Q = np.zeros(B.shape[:-3] + (nb, C * (2 * C + 1)))
    Q[..., : 2 * C * C] = B.reshape(B.shape[:-3] + (nb, 2 * C * C))
    lags = Q.reshape(B.shape[:-3] + (nb * C, 2 * C + 1))[..., 1 : C + 1][..., ::-1]
    return np.ascontiguousarray(lags[..., :n, :])


def lag_sum(band: np.ndarray, X: np.ndarray, *, own: bool) -> np.ndarray:
    """``sum_l band[t, l] X[t - l]`` over lags 1..C-1 (and 0 if ``own``), shape of ``X``, upward.

    One product per block of C rows with the 2C rows of its window
    (:func:`lag_blocks`; ``band`` may come as its blocks, made with the same
    ``own``): non-negative sums of at most ``2 C`` products.
    An entry of ``X`` that is not finite makes ``inf`` of the sums of its
    column whose lags reach it, and of no other: a block's product would
    spread it to every row of the block (``0 * inf``).
    """
    blocked = band.ndim == X.ndim + 1  # already :func:`lag_blocks`'s, with the same ``own``
    n, C = X.shape[-2], band.shape[-2] if blocked else band.shape[-1]
    B = band if blocked else lag_blocks(band, own)
    bad = ~np.isfinite(X)
    Xf = np.where(bad, 0.0, X) if bad.any() else X
    out = B @ _block_windows(Xf, C, B.shape[-3])
    out = out.reshape(out.shape[:-3] + (-1, X.shape[-1]))[..., :n, :] * (1.0 + gamma(2 * C + 2))
    if Xf is not X:
        count = np.concatenate([np.zeros_like(bad[..., :1, :], dtype=np.int64),
                                np.cumsum(bad, axis=-2)], axis=-2)  # fmt: skip
        t = np.arange(n)
        reach = count[..., t + (1 if own else 0), :] - count[..., np.maximum(t - C + 1, 0), :]
        out[reach > 0] = np.inf
    return out


class ForwardStates(NamedTuple):
    """What the float64 recurrence leaves for the error model and the reverse pass."""

    norms: np.ndarray  # (..., n, d_v): the 2-norm of every column of every state S_t
    checkpoints: np.ndarray  # (..., blocks + 1, D, d_v): S before each block of STATE_BLOCK, S_n


#: Tokens whose states :func:`state_norms` keeps before forming their norms at once, and
#: the blocks of its checkpoints.
STATE_BLOCK = 64


def state_norms(T: Transitions, S0: np.ndarray) -> ForwardStates:
    """The float64 recurrence's states ``S_t``: their column norms, and checkpoints.

    The recurrence of :func:`~kernelcheck._src.attention.common.transitions.dplr_step`
    (``x = r^T S``, ``S <- Diag(w) S + p x^T + k v^T``, with ``p x^T + k v^T``
    one outer product ``k (x + v)^T`` when the read is written along the
    keys), updated in place; the states of :data:`STATE_BLOCK` tokens are
    kept and their norms formed in one product, and the state at the end of
    each such block is kept as a checkpoint.  Each step rounds at most four
    times per entry, within the recurrence's count in the module's model; a
    state that leaves the float range gives ``inf`` or NaN.
    """
    n, D, dv = T.q.shape[-2], T.q.shape[-1], T.v.shape[-1]
    lead = np.broadcast_shapes(np.shape(S0)[:-2], _lead(T))
    S = np.array(np.broadcast_to(S0, lead + (D, dv)), dtype=np.float64)
    write = T.write
    w = None if T.log_w is None else np.exp(T.log_w)
    col = np.empty(lead + (n, dv))
    block = min(STATE_BLOCK, n)
    kept = np.empty(lead + (block, D, dv))
    checkpoints = np.empty(lead + (-(-n // block) + 1, D, dv))
    checkpoints[..., 0, :, :] = S
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(n):
            x = np.matmul(T.read[..., t, None, :], S)[..., 0, :]
            if w is not None:
                S *= w[..., t, :, None]
            if write is None:
                S += T.k[..., t, :, None] * (x + T.v[..., t, :])[..., None, :]
            else:
                S += write[..., t, :, None] * x[..., None, :]
                S += T.k[..., t, :, None] * T.v[..., t, None, :]
            i = t % block
            kept[..., i, :, :] = S
            if i == block - 1 or t == n - 1:
                checkpoints[..., t // block + 1, :, :] = S
                t0 = t - i
                col[..., t0 : t + 1, :] = np.sqrt(
                    np.einsum(
                        "...tij,...tij->...tj", kept[..., : i + 1, :, :], kept[..., : i + 1, :, :]
                    )  # fmt: skip
                )
    return ForwardStates(col, checkpoints)
