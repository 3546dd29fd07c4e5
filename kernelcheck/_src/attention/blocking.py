"""Memory blocking and worker threads of the attention forms.

Quadratic forms process query rows in blocks (:func:`query_block_rows`);
linear forms form prefix sums block by block (:func:`causal_prefix`) or
chunk by chunk (:func:`chunked_products`), the latter on worker threads
with single-threaded BLAS for large inputs.  Memory stays bounded by
:data:`BLOCK_ELEMENTS` entries per intermediate, whatever n is.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np

# Intermediates are processed in blocks of at most this many entries
# (32 MiB of float64), so memory stays bounded for long sequences.
BLOCK_ELEMENTS = 1 << 22
#: Fewest query blocks of a causal quadratic form (see ``query_block_rows``).
CAUSAL_BLOCKS = 16
#: Smallest causal block, so that tiny inputs are not split into one-row blocks.
_MIN_CAUSAL_ROWS = 32


def swap(A: np.ndarray) -> np.ndarray:
    return np.swapaxes(A, -1, -2)


def with_ones(V: np.ndarray) -> np.ndarray:
    """``[V, 1]``: one product then gives numerators and normalisers together."""
    W = np.empty(V.shape[:-1] + (V.shape[-1] + 1,), dtype=V.dtype)
    W[..., :-1] = V
    W[..., -1] = 1.0
    return W


def batch_size(shape: tuple[int, ...]) -> int:
    return int(np.prod(shape, dtype=np.int64)) if shape else 1


def query_block_rows(n: int, budget_rows: int, causal: bool) -> int:
    """Rows per query block for the quadratic forms.

    Memory caps a block at ``budget_rows`` rows.  Causal forms also use at
    least ``CAUSAL_BLOCKS`` blocks, so a block forms logits only up to its own
    last row: the pairs formed are ``n (n + r) / 2`` for ``r`` rows a block,
    within ``1 + 1 / CAUSAL_BLOCKS`` of the ``n (n + 1) / 2`` the mask keeps,
    at every n (a single block would form all ``n^2`` at small n and half of
    them at large n, bending the measured exponent of C2).
    """
    rows = max(1, min(n, budget_rows))
    if causal:
        rows = min(rows, max(_MIN_CAUSAL_ROWS, -(-n // CAUSAL_BLOCKS)))
    return rows


def formed_pairs(n: int, causal: bool) -> int:
    """(query, key) pairs the quadratic forms evaluate for one sequence of length n.

    ``n^2`` bidirectional; causal, ``sum_b r_b * e_b`` over query blocks of
    ``r_b`` rows ending at row ``e_b`` (see ``query_block_rows``), which is
    ``n (n + r) / 2`` for equal blocks of r rows: the masked pairs inside each
    diagonal block are formed and then zeroed.
    """
    if not causal:
        return n * n
    r = query_block_rows(n, BLOCK_ELEMENTS // n, True)
    q, rem = divmod(n, r)
    # full blocks b = 0..q-1 have r rows ending at (b + 1) r; the last, rem rows ending at n
    return r * r * q * (q + 1) // 2 + rem * n


def prefix_sum_inplace(P: np.ndarray) -> None:
    """Running sum over axis -3, in place, one slice at a time.

    A loop over the axis adds whole (D, m) slices at memory speed;
    ``np.cumsum`` along a non-last axis walks the array with a large stride
    and is tens of times slower for these shapes.
    """
    for t in range(1, P.shape[-3]):
        np.add(P[..., t, :, :], P[..., t - 1, :, :], out=P[..., t, :, :])


def causal_prefix(A: np.ndarray, B: np.ndarray, W: np.ndarray) -> np.ndarray:
    """``H_i = sum_{j <= i} (a_i . b_j) w_j`` by prefix sums of ``b_j w_j^T``.

    Blocks of tokens hold at most ``BLOCK_ELEMENTS`` state entries; the state
    at the end of a block is carried into the next.
    """
    batch, n, D = A.shape[:-2], A.shape[-2], A.shape[-1]
    m = W.shape[-1]
    H = np.empty(batch + (n, m), dtype=W.dtype)
    S = np.zeros(batch + (D, m), dtype=W.dtype)
    rows = max(1, min(n, BLOCK_ELEMENTS // max(1, D * m * batch_size(batch))))
    for i0 in range(0, n, rows):
        i1 = min(n, i0 + rows)
        P = B[..., i0:i1, :, None] * W[..., i0:i1, None, :]  # (..., b, D, m)
        P[..., 0, :, :] += S
        prefix_sum_inplace(P)
        H[..., i0:i1, :] = (A[..., i0:i1, None, :] @ P)[..., 0, :]
        S = P[..., -1, :, :].copy()
    return H


def chunked_products(
    A: np.ndarray,
    B: np.ndarray,
    W: np.ndarray,
    C: int,
    *,
    S0: np.ndarray | None = None,
    log_gates: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``H_i = sum_{j <= i} (a_i . b_j) d_ij w_j + e_i a_i S0`` in chunks of C tokens.

    Without gates ``d_ij = e_i = 1``.  With ``log_gates`` (``log g_t``, shape
    (..., n)) ``d_ij = prod_{l=j+1..i} g_l`` and ``e_i = prod_{l<=i} g_l``
    (claim C20), always formed in log space from the cumulative sums *within
    the chunk* (``lc_i = sum_{l=t0..i} log g_l`` for the chunk starting at
    t0): ``d_ij = exp(lc_i - lc_j)`` inside a chunk, the state before the
    chunk decayed by ``exp(lc_i)``, and carried to the next chunk as
    ``S <- exp(lc_last) S + sum_j exp(lc_last - lc_j) b_j w_j^T``.  No
    running product of gates is ever formed: a product of thousands of gates
    below 1 underflows, a difference of log sums does not.

    ``S0`` (shape (..., D, m)) is the state before the first token (zero by
    default: a state handed over from an earlier call, C19).  Returns ``H``
    (shape (..., n, m)) and the state after the last token (..., D, m).

    Per group of full chunks: the chunk-local products (scores, their
    product with ``w``, the state increments) are independent across chunks
    and run on worker threads, each on a slice of chunks with single-threaded
    BLAS (many small GEMMs parallelise better across chunks than inside one
    GEMM); the running sum of the states is sequential; the products with the
    state before each chunk are again independent.  Each chunk's products
    are the same calls whatever the number of workers, so the error model
    does not depend on it.
    """
    batch, n, D = A.shape[:-2], A.shape[-2], A.shape[-1]
    m = W.shape[-1]
    C = min(C, n)
    H = np.empty(batch + (n, m), dtype=W.dtype)
    S = np.zeros(batch + (D, m), dtype=W.dtype) if S0 is None else S0.astype(W.dtype, copy=True)
    nfull = n // C
    keep = np.tril(np.ones((C, C), dtype=W.dtype))
    # Chunks per group: bounds the (group, D, m) stack of per-chunk states.
    group = max(1, min(nfull or 1, BLOCK_ELEMENTS // max(1, D * m * batch_size(batch))))
    big = n * (C + D) * m * batch_size(batch) >= _PARALLEL_WORK
    with _chunk_workers(big) as workers:
        for g0 in range(0, nfull, group):
            g1 = min(nfull, g0 + group)
            k = g1 - g0
            a = A[..., g0 * C : g1 * C, :].reshape(batch + (k, C, D))
            b = B[..., g0 * C : g1 * C, :].reshape(batch + (k, C, D))
            w = W[..., g0 * C : g1 * C, :].reshape(batch + (k, C, m))
            lc = None
            if log_gates is not None:
                lc = np.cumsum(log_gates[..., g0 * C : g1 * C].reshape(batch + (k, C)), axis=-1)
            h = np.empty(batch + (k, C, m), dtype=W.dtype)
            dS = np.empty(batch + (k, D, m), dtype=W.dtype)

            def local(lo, hi, a=a, b=b, w=w, h=h, dS=dS, lc=lc):
                bk = b[..., lo:hi, :, :]
                if lc is None:
                    scores = a[..., lo:hi, :, :] @ swap(bk)  # (..., chunks, C, C)
                    scores *= keep
                else:
                    l_ = lc[..., lo:hi, :]
                    scores = a[..., lo:hi, :, :] @ swap(bk)
                    scores *= _decay_mask(l_, keep)
                    # keys weighted by their decay to the chunk's last token
                    bk = bk * np.exp(l_[..., -1:] - l_)[..., None]
                np.matmul(scores, w[..., lo:hi, :, :], out=h[..., lo:hi, :, :])
                np.matmul(swap(bk), w[..., lo:hi, :, :], out=dS[..., lo:hi, :, :])

            def carry(lo, hi, a=a, h=h, dS=dS, S=S, lc=lc):
                # token i of chunk c sees the state after chunk c - 1 (S, before the group)
                if lo == 0:
                    term = a[..., 0, :, :] @ S
                    if lc is not None:
                        term *= np.exp(lc[..., 0, :])[..., None]
                    h[..., 0, :, :] += term
                    lo = 1
                if hi > lo:
                    term = a[..., lo:hi, :, :] @ dS[..., lo - 1 : hi - 1, :, :]
                    if lc is not None:
                        term *= np.exp(lc[..., lo:hi, :])[..., None]
                    h[..., lo:hi, :, :] += term

            _split(local, k, workers)
            if lc is None:
                dS[..., 0, :, :] += S
                prefix_sum_inplace(dS)  # dS[c] is now the state after chunk c
            else:
                decay = np.exp(lc[..., -1])  # (..., k): the gates' product over each chunk
                dS[..., 0, :, :] += decay[..., 0, None, None] * S
                for c in range(1, k):
                    dS[..., c, :, :] += decay[..., c, None, None] * dS[..., c - 1, :, :]
            _split(carry, k, workers)
            H[..., g0 * C : g1 * C, :] = h.reshape(batch + (k * C, m))
            S = dS[..., -1, :, :].copy()
    r0 = nfull * C
    if r0 < n:
        a, b, w = A[..., r0:, :], B[..., r0:, :], W[..., r0:, :]
        c = n - r0
        scores = a @ swap(b)
        if log_gates is None:
            scores *= keep[:c, :c]
            H[..., r0:, :] = scores @ w + a @ S
            S = S + swap(b) @ w
        else:
            l_ = np.cumsum(log_gates[..., r0:], axis=-1)
            scores *= _decay_mask(l_, keep[:c, :c])
            H[..., r0:, :] = scores @ w + np.exp(l_)[..., None] * (a @ S)
            bk = b * np.exp(l_[..., -1:] - l_)[..., None]
            S = np.exp(l_[..., -1])[..., None, None] * S + swap(bk) @ w
    return H, S


def _decay_mask(lc: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """``exp(lc_i - lc_j)`` for ``j <= i``, 0 above the diagonal (never ``exp`` of a positive).

    ``lc`` is non-increasing along the last axis (log gates are <= 0), so every
    kept exponent is <= 0: the mask lies in [0, 1] and cannot overflow.
    """
    diff = lc[..., :, None] - lc[..., None, :]
    np.minimum(diff, 0.0, out=diff)  # the masked (j > i) entries, positive, are zeroed below
    np.exp(diff, out=diff)
    diff *= keep
    return diff


# Below this many multiply-adds (about 2**24) the chunked form runs inline.
_PARALLEL_WORK = 1 << 24


class _Workers:
    """A thread pool and its size, or ``None`` for inline execution."""

    def __init__(self, pool, size):
        self.pool = pool
        self.size = size


@contextmanager
def _chunk_workers(enabled: bool):
    """Worker threads with BLAS limited to one thread each, if threadpoolctl is present.

    Without threadpoolctl (or for small work, or on one core) everything runs
    inline with the BLAS library's own threading.
    """
    controller = _blas_controller() if enabled else None
    threads = 1
    if controller is not None:
        threads = max((lib.num_threads for lib in controller.lib_controllers), default=1)
    if controller is None or threads < 2:
        yield _Workers(None, 1)
        return
    with controller.limit(limits=1, user_api="blas"):
        with ThreadPoolExecutor(max_workers=threads) as pool:
            yield _Workers(pool, threads)


_CONTROLLER: list = []


def _blas_controller():
    """The threadpoolctl controller of the BLAS libraries (created once), or None."""
    if not _CONTROLLER:
        try:
            from threadpoolctl import ThreadpoolController

            controller = ThreadpoolController().select(user_api="blas")
            _CONTROLLER.append(controller if controller.lib_controllers else None)
        except Exception:  # threadpoolctl missing or unable to inspect: run inline
            _CONTROLLER.append(None)
    return _CONTROLLER[0]


def _split(fn, k: int, workers: _Workers) -> None:
    """Run ``fn(lo, hi)`` over ``[0, k)``, cut into one contiguous range per worker.

    The workers run under the caller's floating-point error state
    (``np.errstate`` is per thread: without this, warnings the caller
    silenced would leak from the worker threads).
    """
    if workers.pool is None or k < 2:
        fn(0, k)
        return
    parts = min(workers.size, k)
    edges = [round(i * k / parts) for i in range(parts + 1)]
    err = np.geterr()

    def run(lo: int, hi: int) -> None:
        with np.errstate(**err):
            fn(lo, hi)

    futures = [
        workers.pool.submit(run, lo, hi) for lo, hi in zip(edges[:-1], edges[1:], strict=True)
    ]
    for f in futures:
        f.result()
