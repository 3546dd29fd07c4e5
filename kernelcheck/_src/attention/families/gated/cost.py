"""Operation counts and state sizes of the gated forms (claims C3, C11, C20)."""

from __future__ import annotations

from kernelcheck._src.attention.common.blocking import formed_pairs, group_chunks
from kernelcheck._src.attention.families.linear.cost import chunked_cost


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
    """Gated recurrent: ``5 n D (d_v + 1) + n d_v``: the plain step plus the state's decay.

    The decay ``g_t [S, z]`` is ``D (d_v + 1)`` multiplications a token on
    top of the plain recurrence's ``4 D (d_v + 1) + d_v`` (C11, C20).
    """
    return 5 * n * D * (d_v + 1) + n * d_v, D * (d_v + 1)


def gated_chunked_cost(n: int, d: int, D: int, d_v: int, chunk_size: int, causal: bool):
    """Gated chunked: :func:`chunked_cost` plus the larger of its two ways' extra work.

    Chunk-local (float32, or groups of chunks decaying beyond
    :func:`~kernelcheck._src.attention.common.decays.factor_range`): ``4 c^2`` per
    chunk (its decay mask), ``n (D + d_v + 3)`` (key and query decays, log
    sums) and ``D (d_v + 1)`` per chunk (the state's decay).  Scaled once per
    group of chunks (the float64 default): ``2 n D`` (the scaled rows),
    ``3 n`` (the log sums and their two ``exp``) and ``2 D (d_v + 1)`` per
    group (the state's decay and check; the groups of
    :func:`~kernelcheck._src.attention.common.blocking.group_chunks`).  The larger
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
