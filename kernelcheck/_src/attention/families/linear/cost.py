"""Operation counts and state sizes of the linear forms (claims C3, C11).

Counts per sequence (one batch entry): multiply-add = 2 flops, an ``exp``, a
division or an addition 1 each; feature maps are not counted.  Every count is
closed-form arithmetic in the sizes.
"""

from __future__ import annotations

from kernelcheck._src.attention.common.blocking import auto_chunk_size


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
