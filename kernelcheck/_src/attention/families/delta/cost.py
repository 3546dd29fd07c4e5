"""Operation counts and state sizes of the delta rule's forms (claims C3, C11, C22).

Counts per sequence (one batch entry): multiply-add = 2 flops, an ``exp``,
a division or an addition 1 each.  Every form also checks its inputs and
output finite (one pass over each: ``n (2 D + 2 d_v + w)`` for the per-token
inputs of total width ``w``) and builds its transitions (``n (D + d_v)``:
``beta v`` and ``beta k``).  The state is ``D d_v`` numbers, independent of n.
"""

from __future__ import annotations

from kernelcheck._src.attention.common.transitions import chunked_cost, steps_cost


def checks(n: int, D: int, d_v: int, widths: int) -> int:
    """The finiteness passes over the inputs and the output: ``n (2 D + 2 d_v + widths)``."""
    return n * (2 * D + 2 * d_v + widths)


def delta_recurrent_cost(n: int, d: int, D: int, d_v: int, chunk_size: int, causal: bool):
    """Recurrent: ``n (6 D d_v + 2 d_v)`` and the checks; state ``D d_v`` (C11)."""
    return steps_cost(n, D, d_v, decay=False, dplr=False) + checks(n, D, d_v, 1), D * d_v


def delta_chunked_cost(n: int, d: int, D: int, d_v: int, chunk_size: int, causal: bool):
    """Chunked: :func:`~kernelcheck._src.attention.common.transitions.chunked_cost`, no decay."""
    flops = chunked_cost(n, D, d_v, chunk_size, width=0, general=False)
    return flops + n * (D + d_v) + checks(n, D, d_v, 1), D * d_v


def delta_parallel_cost(n: int, d: int, D: int, d_v: int, chunk_size: int, causal: bool):
    """Parallel: the chunked count with one chunk of n tokens (``2 n^2 (D + d_v)`` and more)."""
    return delta_chunked_cost(n, d, D, d_v, n, causal)[0], n * (D + d_v)
