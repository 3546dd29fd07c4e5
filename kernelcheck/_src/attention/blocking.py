"""Memory blocking and worker threads of the attention forms.

Quadratic forms process query rows in blocks (:func:`query_block_rows`);
linear forms make the bidirectional products whole
(:func:`bidirectional_products`) and the causal ones chunk by chunk in groups
of chunks that fit a core's cache (:data:`CACHE_BYTES`,
:func:`causal_products`), on worker threads with single-threaded BLAS for
large inputs.  Each group's rows go to a *sink* (see
:class:`~kernelcheck._src.attention.types.NormalizedRows`) that checks and
divides them while they are cached.  Memory beyond the inputs and the output
stays bounded, whatever n is.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np

from kernelcheck._src.attention.types import RawRows

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


def auto_chunk_size(D: int) -> int:
    """The chunk size the causal linear forms use unless told otherwise: 32, or 64 for D > 1024.

    The per-chunk products are small GEMMs, (C x D)(D x C), (C x C)(C x m),
    (D x C)(C x m), (C x D)(D x m): the work within chunks,
    ``2 n C (D + m)``, grows with C while the state products, ``4 n D m``,
    do not, and below about 32 rows the GEMMs lose BLAS speed.  Measured on
    OpenBLAS (AVX-512, one thread, ``benchmarks/bench_attention.py`` group
    ``chunk-size``): C = 32 within 1.2-1.3x of the GEMM floor at D = 256,
    C = 64 1.7-2x; at D = 2048 (a 1 MiB state per chunk) C = 64 is the faster.
    """
    return 32 if D <= 1024 else 64


class ValueRows:
    """The rows ``W[r0:r1]`` of the value matrix of a linear form: ``[V, 1]`` or ``V``.

    ``[V, 1]`` gives numerators and normalisers from one product.  It is never
    formed for all n: each block of rows is copied into one reused buffer
    whose last column is set to 1 once (the kernels finish with a block's
    values before asking for the next one, so the buffer is free again).
    """

    def __init__(self, V: np.ndarray, normalize: bool):
        self.V = V
        self.normalize = normalize
        self.m = V.shape[-1] + (1 if normalize else 0)
        self._buf: np.ndarray | None = None

    def __call__(self, r0: int, r1: int) -> np.ndarray:
        if not self.normalize:
            return self.V[..., r0:r1, :]
        rows = r1 - r0
        if self._buf is None or self._buf.shape[-2] < rows:
            self._buf = np.empty(self.V.shape[:-2] + (rows, self.m), dtype=self.V.dtype)
            self._buf[..., -1] = 1.0
        buf = self._buf[..., :rows, :]
        buf[..., :-1] = self.V[..., r0:r1, :]
        return buf


class MatrixRows(ValueRows):
    """The rows of an explicit value matrix ``W`` (already ``[V, 1]`` or ``V``)."""

    def __init__(self, W: np.ndarray):
        super().__init__(W, False)


#: Bytes of the working set of one block of rows (or one worker's chunks) of
#: the linear forms: small enough for a core's L2 cache, so that each block's
#: products, finiteness check and division run on cached data.
CACHE_BYTES = 1 << 20


def bidirectional_products(A: np.ndarray, B: np.ndarray, V: np.ndarray, normalize: bool):
    """``num = A (B^T V)`` and, normalised, ``den = A (B^T 1)`` (claims C10, C14).

    The floor's two GEMMs, then the normalisers as a column sum of B and one
    matrix-vector product: ``[V, 1]`` is never formed (its extra column costs a
    copy of V and makes the products one column wider than the floor's), and
    the products stay whole, so BLAS runs them at its best width on all its
    threads (cache-sized blocks of rows ran up to 2x slower on a loaded
    machine, each block paying the threads' synchronisation).  Returns
    ``(num, den)`` (``den`` None unnormalised); ``num`` is fresh, for an
    in-place division.

    Non-finite inputs: an entry of A reaches its row of ``num`` and of
    ``den``; an entry of B at (j, p) reaches row p of ``B^T V`` and entry p
    of ``z = B^T 1``, hence every row of ``num`` or ``den`` (``NaN * 0``,
    ``Inf * 0`` and ``Inf - Inf`` are NaN); an entry of V at (j, c) reaches
    column c of ``B^T V``, hence column c of every row.  Summation: each
    entry of ``B^T V`` and of z is a sum of n terms, then D terms: at most
    ``n + D + 1`` roundings per term.
    """
    M = swap(B) @ V
    # each pass over an input right after the product that read it (the
    # input is then still in the shared cache when it fits)
    z = B.sum(axis=-2) if normalize else None
    num = A @ M
    if z is None:
        return num, None
    return num, (A @ z[..., None])[..., 0]


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

    The matrix form of :func:`causal_products`: returns ``H`` (shape
    (..., n, m)) and the state after the last token (..., D, m), unchecked.
    """
    rows = RawRows(A.shape[:-1] + W.shape[-1:], W.dtype, check=False)
    S = causal_products(A, B, MatrixRows(W), C, rows, S0=S0, log_gates=log_gates)
    return rows.H, S


def causal_products(
    A: np.ndarray,
    B: np.ndarray,
    values: ValueRows,
    C: int,
    sink,
    *,
    S0: np.ndarray | None = None,
    log_gates: np.ndarray | None = None,
) -> np.ndarray:
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
    default: a state handed over from an earlier call, C19).  The rows of H
    go to ``sink`` group by group (``sink.target`` / ``sink.take``, see
    :class:`~kernelcheck._src.attention.types.RawRows`); returns the state
    after the last token (..., D, m).

    Chunks are processed in groups whose working set (the per-chunk states,
    scores and products) is about :data:`CACHE_BYTES` per worker: the running
    sum of the states and the products with them then read cached data
    (groups of all chunks at once ran 1.8x slower at D = 256).  Per group the
    chunk-local products (scores, their product with ``w``, the state
    increments) are independent across chunks and run on worker threads, each
    on a slice of chunks with single-threaded BLAS; the running sum of the
    states is sequential; the products with the state before each chunk are
    again independent.  Each chunk's products are the same calls whatever the
    number of workers, and the group boundaries do not change any sum, so the
    result does not depend on either.

    Non-finite inputs: a_i reaches row i; b_j and w_j reach row j through
    the diagonal score ``(a_j . b_j) w_j`` (and every later row through the
    state), so every NaN or Inf of an input reaches H.
    """
    batch, n, D = A.shape[:-2], A.shape[-2], A.shape[-1]
    m = values.m
    C = min(C, n)
    nb = batch_size(batch)
    S = np.zeros(batch + (D, m), dtype=A.dtype)
    if S0 is not None:
        S[...] = S0
    nfull = n // C
    big = n * (C + D) * m * nb >= _PARALLEL_WORK
    with _chunk_workers(big) as workers:
        per_chunk = 8 * nb * (D * m + C * (C + 2 * m))
        group = max(1, min(nfull or 1, workers.size * CACHE_BYTES // per_chunk))
        bufs = _ChunkBuffers(batch, group, C, D, m, A.dtype)
        keep = np.tril(np.ones((C, C), dtype=A.dtype))
        run = _Group(A, B, values, sink, log_gates, workers)
        for g0 in range(0, nfull, group):
            run(g0 * C, min(group, nfull - g0), C, S, keep, bufs)
        rem = n - nfull * C
        if rem:
            run(nfull * C, 1, rem, S, keep[:rem, :rem], _ChunkBuffers(batch, 1, rem, D, m, A.dtype))
    return S


class _ChunkBuffers:
    """Per-group arrays reused from group to group: states, scores, carried products.

    A group's products are complete (its workers joined) before the next
    group writes them again.
    """

    def __init__(self, batch, group, C, D, m, dtype):
        self.dS = np.empty(batch + (group, D, m), dtype=dtype)
        self.scores = np.empty(batch + (group, C, C), dtype=dtype)
        self.tmp = np.empty(batch + (group, C, m), dtype=dtype)


class _Group:
    """One group of k chunks of c tokens, rows ``r0 .. r0 + k c``, of :func:`causal_products`."""

    def __init__(self, A, B, values, sink, log_gates, workers):
        self.A, self.B, self.values, self.sink = A, B, values, sink
        self.log_gates, self.workers = log_gates, workers

    def __call__(self, r0, k, c, S, keep, bufs):
        A = self.A
        batch, D = A.shape[:-2], A.shape[-1]
        m = self.values.m
        r1 = r0 + k * c
        a = A[..., r0:r1, :].reshape(batch + (k, c, D))
        b = self.B[..., r0:r1, :].reshape(batch + (k, c, D))
        w = self.values(r0, r1).reshape(batch + (k, c, m))
        h_rows = self.sink.target(r0, r1)
        h = h_rows.reshape(batch + (k, c, m))
        s, dS, tmp = bufs.scores[..., :k, :, :], bufs.dS[..., :k, :, :], bufs.tmp[..., :k, :, :]
        lc = None
        if self.log_gates is not None:
            lc = np.cumsum(self.log_gates[..., r0:r1].reshape(batch + (k, c)), axis=-1)

        def local(lo, hi):
            sl = (Ellipsis, slice(lo, hi), slice(None), slice(None))
            bk = b[sl]
            np.matmul(a[sl], swap(bk), out=s[sl])  # (..., chunks, c, c)
            if lc is None:
                s[sl] *= keep
            else:
                l_ = lc[..., lo:hi, :]
                s[sl] *= _decay_mask(l_, keep)
                # keys weighted by their decay to the chunk's last token
                bk = bk * np.exp(l_[..., -1:] - l_)[..., None]
            np.matmul(s[sl], w[sl], out=h[sl])
            np.matmul(swap(bk), w[sl], out=dS[sl])

        def carry(lo, hi):
            # token i of chunk t sees the state after chunk t - 1 (S for the group's first)
            first = lo
            if lo == 0:
                np.matmul(a[..., 0, :, :], S, out=tmp[..., 0, :, :])
                first = 1
            if hi > first:
                prev = dS[..., first - 1 : hi - 1, :, :]
                np.matmul(a[..., first:hi, :, :], prev, out=tmp[..., first:hi, :, :])
            if lc is not None:
                tmp[..., lo:hi, :, :] *= np.exp(lc[..., lo:hi, :])[..., None]
            h[..., lo:hi, :, :] += tmp[..., lo:hi, :, :]

        _split(local, k, self.workers)
        if lc is None:
            dS[..., 0, :, :] += S
            for t in range(1, k):  # dS[t] is now the state after chunk t
                np.add(dS[..., t, :, :], dS[..., t - 1, :, :], out=dS[..., t, :, :])
        else:
            decay = np.exp(lc[..., -1])  # (..., k): the gates' product over each chunk
            dS[..., 0, :, :] += decay[..., 0, None, None] * S
            for t in range(1, k):
                dS[..., t, :, :] += decay[..., t, None, None] * dS[..., t - 1, :, :]
        _split(carry, k, self.workers)
        S[...] = dS[..., k - 1, :, :]
        self.sink.take(r0, r1, h_rows)


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
    """A thread pool and the number of threads working (the caller's included), or ``None``."""

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
        with ThreadPoolExecutor(max_workers=threads - 1) as pool:
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

    # the calling thread takes the first range itself: one hand-over fewer per call
    futures = [workers.pool.submit(run, lo, hi) for lo, hi in zip(edges[1:-1], edges[2:])]
    try:
        fn(edges[0], edges[1])
    finally:
        for f in futures:
            f.result()
