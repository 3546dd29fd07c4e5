"""Operation counts and state sizes of the attention forms (claims C2, C3, C11).

One function per form, ``cost(n, d, D, d_v, chunk_size, causal) -> (flops,
state)``, each registered beside its form in
:mod:`kernelcheck._src.attention.registry` (whose :func:`cost_model` is the
public entry point).  Counts are per sequence (one batch entry):
multiply-add = 2 flops, an ``exp``, a division or an addition 1 each;
feature maps are not counted (they are the caller's input).  Every count is
closed-form arithmetic in the sizes: no loop over n.
"""

from __future__ import annotations

from kernelcheck._src.attention.blocking import auto_chunk_size, formed_pairs, group_chunks

__all__ = [
    "softmax_cost",
    "kernelized_cost",
    "linear_cost",
    "parallel_cost",
    "chunked_cost",
    "gated_parallel_cost",
    "gated_recurrent_cost",
    "gated_chunked_cost",
]


def softmax_cost(n: int, d: int, D: int, d_v: int, chunk_size: int, causal: bool):
    """Softmax: ``2 P d + 3 P + 2 P d_v + n d_v`` plus ``n d + 2 n d_v``; state ``n (d + d_v)``.

    ``P`` is the number of (query, key) pairs formed: ``n^2`` bidirectional,
    ``~ n (n + r) / 2`` causal (``r`` rows a query block, see
    :func:`~kernelcheck._src.attention.blocking.formed_pairs`).  The terms are
    the logits, the max/subtract/exp/sum, the weighted values and the
    division, then the query scaling (n d) and the output's finiteness pass
    (2 n d_v).  The state is the key/value cache, growing with n (C2).
    """
    pairs = formed_pairs(n, causal)
    flops = 2 * pairs * d + 3 * pairs + 2 * pairs * d_v + n * d_v + n * d + 2 * n * d_v
    return flops, n * (d + d_v)


def kernelized_cost(n: int, d: int, D: int, d_v: int, chunk_size: int, causal: bool):
    """Kernelized: ``P (2 d + 1) + 2 P (d_v + 1) + n d_v``; state ``n (d + d_v)``."""
    pairs = formed_pairs(n, causal)
    return pairs * (2 * d + 1) + 2 * pairs * (d_v + 1) + n * d_v, n * (d + d_v)


def linear_cost(n: int, d: int, D: int, d_v: int, chunk_size: int, causal: bool):
    """Recurrent: ``4 n D (d_v + 1) + n d_v``; state ``D (d_v + 1)``.

    Claims C3, C11.
    """
    return 4 * n * D * (d_v + 1) + n * d_v, D * (d_v + 1)


def parallel_cost(n: int, d: int, D: int, d_v: int, chunk_size: int, causal: bool):
    """Parallel: bidirectional ``4 n D d_v + 4 n D + 2 n (d_v + 1) + n d_v``; causal its blocks'.

    Causal ``parallel`` forms its sums in blocks of ``auto_chunk_size(D)``
    tokens (``chunk_size`` is not its option and is ignored).
    """
    if causal:
        return chunked_cost(n, d, D, d_v, auto_chunk_size(D), causal)
    # phi_k^T V and 1^T phi_k (inner dimension n), phi_q [phi_k^T V, z]
    # (d_v + 1 columns, inner dimension D), the check's column sums of those
    # d_v + 1 rows (one GEMV, blocking.columns_finite), then the n d_v divisions
    return 4 * n * D * d_v + 4 * n * D + 2 * n * (d_v + 1) + n * d_v, D * (d_v + 1)


def chunked_cost(n: int, d: int, D: int, d_v: int, chunk_size: int, causal: bool):
    """Chunked: ``sum_c 2 c^2 (D + d_v + 1) + 4 n D (d_v + 1) + k D (d_v + 1) + n (2 d_v + 1)``.

    Chunks ``c_1..c_k`` of ``C = min(chunk_size, n)`` tokens (the last may be
    shorter): the full square products within each chunk, the state
    products, the running sum of the chunk states, the sum of each row's
    two parts and the divisions.  State
    ``D (d_v + 1)``, independent of n (C11).
    """
    c = min(chunk_size, n)
    full, rem = divmod(n, c)
    chunks = full + (1 if rem else 0)
    squares = full * c * c + rem * rem
    flops = (
        2 * squares * (D + d_v + 1)
        + 4 * n * D * (d_v + 1)
        + chunks * D * (d_v + 1)
        + n * (d_v + 1)
        + n * d_v
    )
    return flops, D * (d_v + 1)


def gated_parallel_cost(n: int, d: int, D: int, d_v: int, chunk_size: int, causal: bool):
    """Gated parallel: ``2 P D + 4 P + 2 P (d_v + 1) + n d_v + n``; state ``n (D + d_v)``.

    ``P`` pairs formed as for causal softmax (the blocks of query rows); per
    pair the score, the decay exponent, its clamp, ``exp`` and the product;
    ``n`` for the cumulative log gates.  Like every quadratic form it keeps
    the keys and values (C2), not a state.
    """
    pairs = formed_pairs(n, True)
    return 2 * pairs * D + 4 * pairs + 2 * pairs * (d_v + 1) + n * d_v + n, n * (D + d_v)


def gated_recurrent_cost(n: int, d: int, D: int, d_v: int, chunk_size: int, causal: bool):
    """Gated recurrent: ``6 n D (d_v + 1) + n d_v``: the plain step plus the state's decay."""
    return 6 * n * D * (d_v + 1) + n * d_v, D * (d_v + 1)


def gated_chunked_cost(n: int, d: int, D: int, d_v: int, chunk_size: int, causal: bool):
    """Gated chunked: :func:`chunked_cost` plus the larger of its two ways' extra work.

    Chunk-local (float32, or groups of chunks decaying beyond
    :func:`~kernelcheck._src.attention.decays.factor_range`): ``4 c^2`` per
    chunk (its decay mask), ``n (D + d_v + 3)`` (key and query decays, log
    sums) and ``D (d_v + 1)`` per chunk (the state's decay).  Scaled once per
    group of chunks (the float64 default): ``2 n D`` (the scaled rows),
    ``3 n`` (the log sums and their two ``exp``) and ``2 D (d_v + 1)`` per
    group (the state's decay and check; the groups of
    :func:`~kernelcheck._src.attention.blocking.group_chunks`).  The larger
    bounds either; the scaled way is the smaller unless d_v is far below C.
    State ``D (d_v + 1)``.
    """
    flops, state = chunked_cost(n, d, D, d_v, chunk_size, causal)
    c = min(chunk_size, n)
    full, rem = divmod(n, c)
    chunks = full + (1 if rem else 0)
    local = 4 * (full * c * c + rem * rem) + n * (D + d_v + 3) + chunks * D * (d_v + 1)
    G = group_chunks(1, c, D, d_v + 1, True, full)
    groups = -(-full // G) + (1 if rem else 0)
    scaled = 2 * n * D + 3 * n + groups * 2 * D * (d_v + 1)
    return flops + max(local, scaled), state
