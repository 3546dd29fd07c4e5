"""Operation count and state size of exact softmax attention (claim C2)."""

from __future__ import annotations

from kernelcheck._src.attention.common.blocking import formed_pairs


def softmax_cost(n: int, d: int, D: int, d_v: int, chunk_size: int, causal: bool):
    """Softmax: ``2 P d + 3 P + 2 P d_v + n d_v`` plus ``n d + 2 n d_v``; state ``n (d + d_v)``.

    ``P`` is the number of (query, key) pairs formed: ``n^2`` bidirectional,
    ``~ n (n + r) / 2`` causal (``r`` rows a query block, see
    :func:`~kernelcheck._src.attention.common.blocking.formed_pairs`).  The terms are
    the logits, the max/subtract/exp/sum, the weighted values and the
    division, then the query scaling (n d) and the output's finiteness pass
    (2 n d_v).  The state is the key/value cache, growing with n (C2).
    """
    pairs = formed_pairs(n, causal)
    flops = 2 * pairs * d + 3 * pairs + 2 * pairs * d_v + n * d_v + n * d + 2 * n * d_v
    return flops, n * (d + d_v)
