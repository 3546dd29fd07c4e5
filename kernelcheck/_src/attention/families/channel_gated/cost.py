"""Operation counts and state sizes of the per-channel gated forms (claims C3, C11, C21).

Counts per sequence (one batch entry) with every option present (gates on
the key and the value channels, RWKV-6's bonus), as the family's example
arguments have them: multiply-add = 2 flops; ``exp``, a product, a sum, a
running sum or product 1 per entry; ``log``, comparisons and copies 0.
"""

from __future__ import annotations

from kernelcheck._src.attention.families.channel_gated.forms import parallel_rows


def channel_gated_recurrent_cost(n: int, d: int, D: int, d_v: int, chunk_size: int, causal: bool):
    """Recurrent: ``6 n D d_v + 3 n D + 2 n d_v``; state ``D d_v`` (constant in n, C11).

    Per token the decay of each side (``2 D d_v``), the outer product and
    its addition (``2 D d_v``), the read-out (``2 D d_v``); the bonus
    ``((q o u) . k) v`` for every token after the loop (``3 D + 2 d_v``).
    """
    return 6 * n * D * d_v + 3 * n * D + 2 * n * d_v, D * d_v


def channel_gated_parallel_cost(n: int, d: int, D: int, d_v: int, chunk_size: int, causal: bool):
    """Parallel: ``5 P (D + d_v) + n (4 D + 3 d_v)``; it keeps the keys and values (C2).

    ``P`` the (query, key) pairs its blocks of rows form
    (:func:`~kernelcheck._src.attention.families.channel_gated.forms.parallel_rows`);
    per pair and key channel the product, the exponent, its ``exp``, the
    decayed product and the sum over channels, likewise per value channel;
    the cumulative log gates (``n (D + d_v)``) and the bonus (``3 n D + 2 n d_v``).
    """
    rows = parallel_rows(n, max(D, d_v), 1)
    pairs = sum((min(n, i0 + rows) - i0) * min(n, i0 + rows) for i0 in range(0, n, rows))
    return 5 * pairs * (D + d_v) + n * (4 * D + 3 * d_v), n * (D + d_v)


def channel_gated_chunked_cost(n: int, d: int, D: int, d_v: int, chunk_size: int, causal: bool):
    """Chunked: ``2 sum_c c^2 (D + d_v) + 4 n D d_v + 3 k D d_v + 12 n (D + d_v)``; state D d_v.

    Chunks ``c_1..c_k`` of ``C = min(chunk_size, n)`` tokens (the last may be
    shorter), each with the scaled products: the chunk's weights and their
    product with the values (``2 c^2 (D + d_v)``), its own state and the
    read-out of the state entering it (``4 c D d_v``), the carried state's
    two decays and addition (``3 D d_v``).  Per token and key channel: the
    running log sums and the chunk's total decay (1), the decays from the
    chunk's start, ``exp(-lc)`` and to the chunk's end (3), the scaled
    queries and keys and the keys decayed to the end (3); per value channel
    likewise with the decays of the outputs (8), the addition of the two
    parts (1); the bonus (``3 n D + 2 n d_v``); the inputs' largest entries
    for the scaled products' ranges (``2 n D + n d_v``).  A chunk with a gate
    of 0 or decays beyond that range forms its decays pair by pair (about
    ``4 c^2 (D + d_v)`` more).
    """
    c = min(chunk_size, n)
    full, rem = divmod(n, c)
    chunks = full + (1 if rem else 0)
    squares = full * c * c + rem * rem
    flops = 2 * squares * (D + d_v) + 4 * n * D * d_v + 3 * chunks * D * d_v + 12 * n * (D + d_v)
    return flops, D * d_v
