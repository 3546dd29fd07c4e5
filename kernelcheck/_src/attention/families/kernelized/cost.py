"""Operation count and state size of exact kernelized attention (claims C2, C10)."""

from __future__ import annotations

from kernelcheck._src.attention.common.blocking import formed_pairs


def kernelized_cost(n: int, d: int, D: int, d_v: int, chunk_size: int, causal: bool):
    """Kernelized: ``P (2 d + 1) + 2 P (d_v + 1) + n d_v``; state ``n (d + d_v)``."""
    pairs = formed_pairs(n, causal)
    return pairs * (2 * d + 1) + 2 * pairs * (d_v + 1) + n * d_v, n * (d + d_v)
