"""Memory blocking and worker threads of the attention forms.

Quadratic forms process query rows in blocks (:func:`query_block_rows`);
linear forms make the bidirectional products whole
(:func:`bidirectional_normalized`) and the causal ones chunk by chunk in groups
of chunks that fit a core's cache (:data:`CACHE_BYTES`,
:func:`causal_products`), on worker threads with single-threaded BLAS for
large inputs.  Each group's rows go to a *sink* (see
:class:`~kernelcheck._src.attention.common.types.NormalizedRows`) that checks and
divides them while they are cached.  Memory beyond the inputs and the output
stays bounded, whatever n is.
"""

from __future__ import annotations

import itertools
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np

from kernelcheck._src.attention.common.decays import Decays, GroupScales, decay_mask
from kernelcheck._src.attention.common.types import RawRows
from kernelcheck._src.core.validate import all_finite

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
    Remeasured with the grouped products of :func:`causal_products` (n = 8192,
    D = 256, d_v = 64, one thread, CPU time; OpenBLAS 0.3.31 on a 2-core
    Xeon): C = 16 1.07x and C = 64 1.2-1.25x the time of C = 32.  C = 32
    needs 1.33x the floor's operations (``2 C (D + m)`` per token over the
    floor's ``4 D d_v``), C = 16 1.17x, but its products are too small for
    BLAS speed; at C = 64 a (64 x 256)(256 x 65) product ran 3x slower per
    operation than a (32 x 256)(256 x 65) one (OpenBLAS's small-matrix
    kernels stop at about 10^6 multiply-adds).
    """
    return 32 if D <= 1024 else 64


class ValueRows:
    """The rows ``W[r0:r1]`` of the value matrix of a linear form: ``[V, 1]`` or ``V``.

    ``[V, 1]`` gives numerators and normalisers from one product.  It is never
    formed for all n: each block of rows is copied into a reused buffer of
    the calling thread whose last column is set to 1 once (a thread finishes
    with a block's values before asking for the next one, so its buffer is
    free again; each worker thread of :func:`causal_products` has its own).
    """

    def __init__(self, V: np.ndarray, normalize: bool):
        self.V = V
        self.normalize = normalize
        self.m = V.shape[-1] + (1 if normalize else 0)
        self._local = threading.local()

    def __call__(self, r0: int, r1: int) -> np.ndarray:
        if not self.normalize:
            return self.V[..., r0:r1, :]
        rows = r1 - r0
        buf = getattr(self._local, "buf", None)
        if buf is None or buf.shape[-2] < rows:
            buf = np.empty(self.V.shape[:-2] + (rows, self.m), dtype=self.V.dtype)
            buf[..., -1] = 1.0
            self._local.buf = buf
        out = buf[..., :rows, :]
        out[..., :-1] = self.V[..., r0:r1, :]
        return out


class MatrixRows(ValueRows):
    """The rows of an explicit value matrix ``W`` (already ``[V, 1]`` or ``V``)."""

    def __init__(self, W: np.ndarray):
        super().__init__(W, False)


#: Bytes of the working set of one block of rows (or one worker's group of
#: chunks) of the linear forms: a core's L2 cache (2 MiB on the AVX-512 Xeon
#: where :func:`group_chunks` was measured), so that each block's products,
#: finiteness check and division run on cached data.  On a 2-core AVX2 EPYC
#: with 512 KiB of L2, causal ``chunked`` (n = 8192, D = 256, d_v = 64,
#: interleaved, 20 rounds) took 3.02x, 2.11x, 2.00x and 2.09x the floor's
#: minimum with 256 KiB, 512 KiB, 1 MiB and 2 MiB: fewer chunks a group cost
#: more hand-overs than the cache saved, and 2 MiB stays.
CACHE_BYTES = 1 << 21


def bidirectional_products(A: np.ndarray, B: np.ndarray, V: np.ndarray) -> np.ndarray:
    """``A (B^T V)``, the unnormalised bidirectional output (C19): the floor's two GEMMs.

    Computed transposed, ``(V^T B) A^T`` (shape (..., d_v, n)), and returned
    as its transposed view: see :func:`bidirectional_normalized` for why.

    Non-finite inputs: an entry of A reaches its row; an entry of B at (j, p)
    reaches column p of ``V^T B`` (``NaN * 0``, ``Inf * 0`` and ``Inf - Inf``
    are NaN), hence every row; an entry of V at (j, c) reaches row c of
    ``V^T B``, hence column c of every row.  Summation: n terms, then D.
    """
    return swap((swap(V) @ B) @ swap(A))


def bidirectional_normalized(A: np.ndarray, B: np.ndarray, V: np.ndarray):
    """``A (B^T V)`` over ``den = A (B^T 1)``, row by row: ``(out, den, finite)`` (C10, C14).

    The floor's two GEMMs, transposed: ``T = [V^T B; z^T]`` with
    ``z = B^T 1`` (a GEMV) as its last row, then ``E^T = T A^T``, shape
    (..., d_v + 1, n): the numerators of token i in column i, its normaliser
    below them in the last row, from one product.  The columns are checked
    by :func:`columns_finite` (their sums by one GEMV) and divided in place
    block by block while cached, and ``out`` is the
    transposed view of the numerators' rows (each matrix Fortran-ordered;
    ``np.ascontiguousarray`` makes a C-ordered copy), ``den`` a view of the
    last row.  Why transposed: for a C-ordered (n, d_v) result OpenBLAS runs
    the product as a d_v-row matrix times an n-column one and splits its 64
    rows between threads, at 0.52x the floor's time for the second GEMM
    alone against 0.40x transposed (n = 8192, D = 256, d_v = 64, interleaved,
    40 rounds, load below 1, on a 2-core AVX-512 Xeon; on a 2-core AVX2 EPYC
    the two layouts of that product ran within 3% of each other, and the
    normalisers' GEMV and row alone took 1.13x the floor, group
    ``parallel-vs-gemm``); on the Xeon the whole form took 1.24-1.28x the
    floor in the old layout (the normalisers as two GEMVs and the output C-ordered),
    0.94-1.02x transposed, and 1.08-1.15x transposed with the division
    writing a C-ordered copy (``benchmarks/bench_attention.py``, group
    ``parallel-vs-gemm``, measures it against the floor).  ``finite`` is
    False when a numerator or normaliser is not finite.

    Non-finite inputs: an entry of A reaches its column of ``E^T`` (each
    entry ``T_c . a_i`` is a sum with a non-finite term: ``NaN``, ``Inf * 0``
    and ``Inf - Inf`` are NaN); an entry of B at (j, p) reaches column p of
    T, hence every column of ``E^T``; an entry of V at (j, c) reaches row c
    of T, hence row c of every column.  A normaliser can overflow while its
    numerators do not (tiny values), so ``den`` is checked as well: a finite
    quotient of an infinite normaliser would be a wrong 0.  Summation: each
    entry of T is a sum of n terms, each of ``E^T`` one of D terms: at most
    ``n + D + 1`` roundings per term; the division rounds once.
    """
    m, n = V.shape[-1], A.shape[-2]
    num = swap(V) @ B  # (..., m, D)
    z = np.ones(B.shape[-2], dtype=B.dtype) @ B  # (..., D); the keys may be more or fewer
    batch = np.broadcast_shapes(num.shape[:-2], z.shape[:-1])
    T = np.empty(batch + (m + 1, A.shape[-1]), num.dtype)
    T[..., :m, :] = num
    T[..., m, :] = z
    Et = T @ swap(A)  # (..., m + 1, n): numerators over their normaliser, token by column
    finite = columns_finite(Et)
    cols = Et.reshape(-1, m + 1, n)
    step = column_block(cols.shape[0], m + 1, Et.itemsize)
    with np.errstate(divide="ignore", invalid="ignore"):
        for r0 in range(0, n, step):
            block = cols[..., r0 : r0 + step]
            np.divide(block[:, :m], block[:, m:], out=block[:, :m])
    return swap(Et[..., :m, :]), Et[..., m, :], finite


def columns_finite(E: np.ndarray) -> bool:
    """True when every entry of ``E`` (shape (..., r, n)) is finite: column sums, then entries.

    The column sums ``1^T E`` are one GEMV per matrix, on the BLAS's
    threads, where :func:`~kernelcheck._src.core.validate.all_finite`'s sum
    runs on one: for bidirectional ``parallel``'s (65, 8192) product the
    form took 20.52 ms against 20.88 ms with ``all_finite`` on each block
    (minima of 40 interleaved rounds, the floor 18.13 ms; 2-core AVX2
    EPYC).  Why a finite sum proves its column finite: ``1.0 * x`` is
    exact, and in any order of additions a NaN stays NaN, an Inf stays Inf
    or meets the opposite Inf and gives NaN.  A sum that overflowed from
    finite entries, or a NaN the BLAS left in the zeroed output, only sends
    the check to the entries, which decide.
    """
    sums = np.zeros(E.shape[:-2] + E.shape[-1:], dtype=E.dtype)
    with np.errstate(all="ignore"):
        np.matmul(np.ones(E.shape[-2], dtype=E.dtype), E, out=sums)
        if np.isfinite(np.add.reduce(sums, axis=None)):
            return True
    return bool(np.isfinite(E).all())


def column_block(batch: int, rows: int, itemsize: int) -> int:
    """Columns (tokens) a block of :func:`bidirectional_normalized`'s ``(batch, rows, n)`` product.

    A block takes those columns of every batch entry, so that its division
    runs on :data:`CACHE_BYTES` of cached data at most (one column at
    least).
    """
    return max(1, CACHE_BYTES // (itemsize * batch * rows))


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
    ``S <- exp(lc_last) S + sum_j exp(lc_last - lc_j) b_j w_j^T`` (the key
    rows scaled once per chunk by their decay to its last token, so the
    state increment is one product).  No running product of gates is ever
    formed: a product of thousands of gates below 1 underflows, a difference
    of log sums does not.

    In float64, when no group of chunks decays by more than ``e^-range``
    (:func:`~kernelcheck._src.attention.common.decays.factor_range`, 531: over a
    group of a few hundred tokens, gates above about 0.2 on average), the
    gates are applied once per group instead
    (:class:`~kernelcheck._src.attention.common.decays.GroupScales`): with ``LC_i``
    the cumulative log gate from the group's first token to i, the rows ``a_i exp(LC_i)`` and
    ``b_j exp(-LC_j)`` go through the plain products, whose state is then a
    plain running sum, decayed once by ``exp(LC_last)`` when the group ends:
    ``(a_i e^{LC_i}) . (b_j e^{-LC_j}) = (a_i . b_j) d_ij`` with two ``exp``
    and two products, the ``10 u`` of the decays in the float64 error model
    (:func:`~kernelcheck._src.attention.families.gated.bound.gated_error_bound`), and the
    extra work is two scalings of the rows and one of the state per group,
    not the mask, the scaled keys and a decayed running sum per chunk.  Only
    ``b_j e^{-LC_j}`` can exceed its unscaled value (by up to
    ``e^{range}``): a group whose scaled state is not finite, or whose scaled
    queries underflowed, is computed again the chunk-local way
    (:meth:`_GroupJob.scaled`).

    ``S0`` (shape (..., D, m)) is the state before the first token (zero by
    default: a state handed over from an earlier call, C19).  The rows of H
    go to ``sink`` group by group (``sink.target`` / ``sink.take``, see
    :class:`~kernelcheck._src.attention.common.types.RawRows`); returns the state
    after the last token (..., D, m).

    Work: chunks are processed in groups of :func:`group_chunks` chunks whose
    working set (per-chunk states, scores, products) fits a core's cache.
    Per group, batched products over its ``(k, C, D)`` stacks (few, wide
    calls): the scores and their product with ``w`` (the chunk-local part),
    the state increment of every chunk; then the inclusive running sum of the
    states from the state before the group (the one sequential step, ``k D m``
    additions), and one batched product of each chunk's rows with the state
    before it.  With worker threads (large inputs) each thread takes the next
    group as it is free and runs it whole, waiting only for the state of the
    group before, which is published as soon as its running sum is done
    (:class:`_StateChain`): the chunk-local products of one group overlap the
    running sum and read-out of the other, with one hand-over per group
    instead of a join of all threads twice per group.  Each chunk's products
    are the same calls and its state the same sum in the same order whatever
    the threads, and, ungated or chunk-local, whatever the groups, so the
    result does not depend on them (tests/attention/common/test_blocking.py compares
    them bit for bit); scaled once per group, the decays are measured from
    each group's first token, so the groups (not the threads) set the
    roundings, each within the error bound.

    Non-finite inputs: a_i reaches row i; b_j and w_j reach row j through
    the diagonal score ``(a_j . b_j) w_j`` (and every later row through the
    state), so every NaN or Inf of an input reaches H.
    """
    batch, n, D = A.shape[:-2], A.shape[-2], A.shape[-1]
    m = values.m
    C = min(C, n)
    nb = batch_size(batch)
    nfull, rem = divmod(n, C)
    G = group_chunks(nb, C, D, m, log_gates is not None, nfull)
    plan = [(g0 * C, min(G, nfull - g0), C) for g0 in range(0, nfull, G)]
    if rem:
        plan.append((nfull * C, 1, rem))
    S = np.zeros(batch + (D, m), dtype=A.dtype)
    if S0 is not None:
        S[...] = S0
    chain = _StateChain(S, len(plan))
    scales = decays = None
    if log_gates is not None:
        scales = GroupScales.of(log_gates, plan, np.result_type(A, B, values.V))
        if scales is None:
            decays = Decays(log_gates, C)
    job = _GroupJob(A, B, values, sink, decays, plan, chain, G, C, log_gates, scales)
    big = n * (C + D) * m * nb >= _PARALLEL_WORK
    with _chunk_workers(big) as workers:
        _run_everywhere(job.work, workers)
    return chain.final()


def group_chunks(nb: int, C: int, D: int, m: int, gated: bool, nfull: int) -> int:
    """Chunks per group of :func:`causal_products`: as many as fit :data:`CACHE_BYTES`.

    A chunk's working set is its state increment (``D m``), scores
    (``C^2``), products (``2 C m``) and, gated, its scaled keys and either
    its decay mask (``C D + C^2``, chunk-local) or its scaled queries
    (``2 C D``, scaled once per group), per batch entry.  Measured at n = 8192, D = 256,
    d_v = 64 (C = 32, one thread, CPU time, interleaved with the GEMM floor):
    groups of 1 MiB and 2 MiB (6 and 12 chunks; the cores' L2 caches are
    2 MiB) are within noise of each other; one chunk a group (the Python
    overhead of about 15 calls per chunk) ran 1.15-1.2x slower, 256 KiB
    groups 1.05-1.15x, all chunks in one group (the states of the whole
    sequence, out of cache) 1.4-1.6x.  On the worker threads (wall time,
    interleaved, three runs of 30-50 rounds at load below 1), 2 MiB groups
    beat 1 MiB: medians 21.2 against 26.2 ms for ``gated_chunked`` and
    14.9 against 19.3 ms for unnormalised ``chunked`` (n = 16384,
    D = d_v = 64), 21.9 against 25.0 ms for ``chunked`` (n = 8192, D = 256,
    d_v = 64), in the last run; fewer groups, fewer hand-overs.
    """
    per_chunk = 8 * nb * (D * m + C * (C + 2 * m) + (C * (D + max(C, D)) if gated else 0))
    return max(1, min(nfull or 1, CACHE_BYTES // per_chunk))


class _ChunkBuffers:
    """One thread's arrays, reused from group to group: states, scores, products.

    A thread finishes a group (its rows handed to the sink) before it takes
    the next, so its buffers are free again; other threads have their own.
    """

    def __init__(self, batch, group, C, D, m, dtype, gated):
        self.dS = np.empty(batch + (group, D, m), dtype=dtype)
        self.scores = np.empty(batch + (group, C, C), dtype=dtype)
        self.tmp = np.empty(batch + (group, C, m), dtype=dtype)
        self.keys = np.empty(batch + (group, C, D), dtype=dtype) if gated else None
        self.queries = np.empty(batch + (group, C, D), dtype=dtype) if gated else None
        self.mask = np.empty(batch + (group, C, C), dtype=dtype) if gated else None
        self.state = np.empty(batch + (D, m), dtype=dtype) if gated else None


class _StateChain:
    """The state after each group, handed from the thread that computed it to the next group's.

    ``wait(g)`` returns the state before group g (blocking until group g - 1
    has published it); ``publish(g, S)`` copies group g's final state into
    one of two slots and wakes group g + 1.  Two slots suffice: group g's
    slot is next overwritten by group g + 2, which waits for group g + 1,
    which has read it (and group g + 1's thread reads it only before its own
    publish).  ``abort()`` wakes every waiter after a failure in any thread.
    Groups publish in order (each waits for the one before), so one counter
    of published groups and one condition serve them all (an event per
    group cost 0.14 ms to create for the 43 groups at n = 8192, D = 256).
    """

    def __init__(self, S: np.ndarray, groups: int):
        self.first = S
        self.slots = np.empty((2,) + S.shape, dtype=S.dtype)
        self.published = 0  # groups 0 .. published - 1 have published
        self.changed = threading.Condition()
        self.failed = False
        self.groups = groups

    def wait(self, g: int) -> np.ndarray:
        if g == 0:
            return self.first
        with self.changed:
            self.changed.wait_for(lambda: self.published >= g or self.failed)
        if self.failed:
            raise _Aborted
        return self.slots[(g - 1) % 2]

    def publish(self, g: int, S: np.ndarray) -> None:
        self.slots[g % 2] = S
        with self.changed:
            self.published = g + 1
            self.changed.notify_all()

    def abort(self) -> None:
        with self.changed:
            self.failed = True
            self.changed.notify_all()

    def final(self) -> np.ndarray:
        return self.slots[(self.groups - 1) % 2].copy()


class _Aborted(Exception):
    """Another thread failed: stop taking groups (its exception is the one raised)."""


class _GroupJob:
    """The groups of one :func:`causal_products` call, taken in order by any number of threads."""

    def __init__(self, A, B, values, sink, decays, plan, chain, G, C, log_gates=None, scales=None):
        self.A, self.B, self.values, self.sink = A, B, values, sink
        self.decays, self.plan, self.chain = decays, plan, chain
        self.G, self.C = G, C
        self.log_gates, self.scales = log_gates, scales
        # the scores of later keys (j > i) are set to 0, not multiplied by 0: a
        # score there may overflow (a_i . b_j for a key the row never sees) and
        # inf * 0 would be NaN in a row whose true value is finite
        self.future = np.triu(np.ones((C, C), dtype=bool), 1)
        self.next = itertools.count()  # next(count) is atomic under the GIL

    def work(self) -> None:
        A = self.A
        batch, D, m = A.shape[:-2], A.shape[-1], self.values.m
        gated = self.log_gates is not None
        bufs = _ChunkBuffers(batch, self.G, self.C, D, m, A.dtype, gated)
        try:
            while not self.chain.failed:
                g = next(self.next)
                if g >= len(self.plan):
                    return
                self.group(g, bufs)
        except _Aborted:
            return
        except BaseException:
            self.chain.abort()
            raise

    def group(self, g: int, bufs: _ChunkBuffers) -> None:
        r0, k, c = self.plan[g]
        r1 = r0 + k * c
        A = self.A
        batch, D, m = A.shape[:-2], A.shape[-1], self.values.m
        a = A[..., r0:r1, :].reshape(batch + (k, c, D))
        b = self.B[..., r0:r1, :].reshape(batch + (k, c, D))
        w = self.values(r0, r1).reshape(batch + (k, c, m))
        h_rows = self.sink.target(r0, r1)
        h = h_rows.reshape(batch + (k, c, m))
        if self.scales is None:
            dec = None if self.decays is None else self.decays.chunks(r0, k, c)
            self.products(g, bufs, a, b, w, h, dec)
        elif not self.scaled(g, bufs, a, b, w, h, self.scales.group(r0, r1, k, c)):
            # a scaled query underflowed or the scaled state overflowed: this
            # group the chunk-local way
            dec = Decays(self.log_gates[..., r0:r1], c).chunks(0, k, c)
            self.products(g, bufs, a, b, w, h, dec)
        self.sink.take(r0, r1, h_rows)

    def products(self, g, bufs, a, b, w, h, dec=None, last=None) -> bool:
        """The group's rows into h and its state published, plain or decayed chunk by chunk.

        ``last`` (the group-scaled way, rows already scaled by :meth:`scaled`):
        the state published is ``last`` times the plain one, and when that is
        not finite nothing is published and False is returned.
        """
        k, c = a.shape[-3], a.shape[-2]
        s, dS = bufs.scores[..., :k, :c, :c], bufs.dS[..., :k, :, :]
        tmp = bufs.tmp[..., :k, :c, :]
        np.matmul(a, swap(b), out=s)  # (..., k, c, c): every chunk's scores at once
        np.copyto(s, 0.0, where=self.future[:c, :c])
        if dec is not None:
            s *= decay_mask(dec, bufs.mask[..., :k, :c, :c])
            # keys weighted once by their decay to the chunk's last token: the
            # state increment is then one product
            np.multiply(b, dec.to_end[..., None], out=bufs.keys[..., :k, :c, :])
            b = bufs.keys[..., :k, :c, :]
        np.matmul(s, w, out=h)
        np.matmul(swap(b), w, out=dS)  # (..., k, D, m): every chunk's state increment
        prev = self.chain.wait(g)  # the state before this group
        # token i of chunk t sees the state after chunk t - 1: for t = 0 the
        # group's state, read before it is published (its slot is reused later)
        np.matmul(a[..., 0, :, :], prev, out=tmp[..., 0, :, :])
        if dec is None:
            dS[..., 0, :, :] += prev
            for t in range(1, k):  # dS[t] is now the state after chunk t
                dS[..., t, :, :] += dS[..., t - 1, :, :]
        else:
            decayed = bufs.state  # the state before chunk t, decayed over chunk t
            np.multiply(prev, dec.whole[..., 0, None, None], out=decayed)
            dS[..., 0, :, :] += decayed
            for t in range(1, k):
                np.multiply(dS[..., t - 1, :, :], dec.whole[..., t, None, None], out=decayed)
                dS[..., t, :, :] += decayed
        after = dS[..., k - 1, :, :]
        if last is not None:
            after = np.multiply(after, last[..., None, None], out=bufs.state)
            if not all_finite(after):
                return False
        self.chain.publish(g, after)
        if k > 1:
            np.matmul(a[..., 1:, :, :], dS[..., : k - 1, :, :], out=tmp[..., 1:, :, :])
        if dec is not None:
            tmp *= dec.from_start[..., None]
        h += tmp
        return True

    def scaled(self, g, bufs, a, b, w, h, scale) -> bool:
        """The gated group as the plain one on scaled rows (see :func:`causal_products`).

        ``scale`` is the group's ``(exp(LC), exp(-LC), exp(LC_last))``.  The
        state after the group is ``exp(LC_last)`` times the plain running
        sum's.  False is returned, before anything is published, when

        * a scaled query ``a_i exp(LC_i)`` underflowed (the floating-point
          underflow flag of that one product): its absolute error would be
          multiplied by the growth ``exp(-LC_j)`` of the keys, beyond the
          error model's ``eta`` per product; scaled by decays alone, as the
          chunk-local way does, an underflow stays within it;
        * the state after the group is not finite: a scaled key or state
          overflowed (only those exceed their unscaled values, and an
          overflow anywhere in the state reaches its last sum), or an input
          was not finite, which the chunk-local way then carries to the
          checked rows as always.

        Otherwise no product overflowed that the chunk-local way would not
        overflow: for ``j <= i`` each scaled term ``a_ip exp(LC_i) b_jp
        exp(-LC_j)`` is the decayed one, and the scores of later keys are set
        to 0 whatever they are.
        """
        up, down, last = scale
        k, c = a.shape[-3], a.shape[-2]
        try:
            with np.errstate(under="raise"):
                a = np.multiply(a, up[..., None], out=bufs.queries[..., :k, :c, :])
        except FloatingPointError:
            return False
        b = np.multiply(b, down[..., None], out=bufs.keys[..., :k, :c, :])
        return self.products(g, bufs, a, b, w, h, last=last)


# Below this many multiply-adds (about 2**24) the chunked form runs inline.
# Above it, one worker thread per BLAS thread, each with single-threaded BLAS
# on whole groups, against the products run inline with BLAS's own threads:
# at n = 16384, D = d_v = 64 the minimum fell from 22.5 to 15.1 ms (1.5x) on
# the 2-core machine, with other work keeping it busy (load average 12; the
# medians there were 44 against 30 ms: a thread descheduled while the next
# group waits for its state stalls that group).  Handing the state over
# before the group's own running sum (a second pass over the group's states
# to add it) cost 5-10% more work: the running sum stays where it waits.
# BLAS's own threads gain little on products of 32 rows, each too small to
# split.
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
    inline with the BLAS library's own threading.  The threads are the
    process's one :func:`_shared_pool`, started once.
    """
    controller = _blas_controller() if enabled else None
    threads = 1
    if controller is not None:
        threads = max((lib.num_threads for lib in controller.lib_controllers), default=1)
    if controller is None or threads < 2:
        yield _Workers(None, 1)
        return
    with controller.limit(limits=1, user_api="blas"):
        yield _Workers(_shared_pool(threads - 1), threads)


_POOL: list = []  # [(ThreadPoolExecutor, workers)] once started
_POOL_LOCK = threading.Lock()


def _shared_pool(workers: int) -> ThreadPoolExecutor:
    """The worker threads of the causal forms, started on first use and kept.

    Starting a thread pool per call and joining it cost about 0.3-0.4 ms of
    a causal ``parallel`` call of 16-25 ms (n = 8192, D = 256, d_v = 64),
    before the first group and after the last.  The pool grows when more
    workers are asked for; idle workers cost nothing and end with the
    interpreter.  A forked child starts its own (the parent's threads do not
    exist there).  Several callers may share it: each caller runs its own
    groups too, so a call never waits for a worker that another call holds
    (see :func:`_run_everywhere`).
    """
    with _POOL_LOCK:
        if not _POOL or _POOL[0][1] < workers:
            if _POOL:
                _POOL.pop()[0].shutdown(wait=False)
            pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kernelcheck-chunks")
            _POOL.append((pool, workers))
        return _POOL[0][0]


def _forget_pool_after_fork() -> None:
    _POOL.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_after_fork)


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


def _run_everywhere(fn, workers: _Workers) -> None:
    """Run ``fn()`` on the calling thread and on every worker thread, and wait for all.

    ``fn`` takes work from a shared queue until it is empty, so the caller
    alone can finish it: a worker task that has not started when the
    caller's own share is done is cancelled instead of waited for (another
    call may hold the shared pool's workers).  The workers run under the
    caller's floating-point error state (``np.errstate`` is per thread:
    without this, warnings the caller silenced would leak from the worker
    threads).  The first exception is raised once every started thread has
    stopped (none is left touching the arrays).
    """
    if workers.pool is None:
        fn()
        return
    err = np.geterr()

    def run() -> None:
        with np.errstate(**err):
            fn()

    futures = [workers.pool.submit(run) for _ in range(workers.size - 1)]
    try:
        fn()
    finally:
        for f in futures:
            if not f.cancel():
                f.result()
