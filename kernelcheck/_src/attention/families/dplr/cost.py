"""Operation counts and state sizes of the diagonal-plus-rank-one forms (claims C3, C11, C23).

The loop does ``9 D d_v`` flops a token (read, decay, two outer products,
two additions, output); the chunked form the general case of
:func:`~kernelcheck._src.attention.common.transitions.chunked_cost` (four
pair products a chunk).  Inputs and output are checked finite as in
:mod:`~kernelcheck._src.attention.families.delta.cost` (``a``, ``b`` and the
gates: width ``3 D``).
"""

from __future__ import annotations

from kernelcheck._src.attention.common.transitions import chunked_cost, steps_cost
from kernelcheck._src.attention.families.delta.cost import checks


def dplr_recurrent_cost(n: int, d: int, D: int, d_v: int, chunk_size: int, causal: bool):
    """Recurrent: ``9 n D d_v`` and the checks; state ``D d_v`` (C11)."""
    return steps_cost(n, D, d_v, decay=True, dplr=True) + checks(n, D, d_v, 3 * D), D * d_v


def dplr_chunked_cost(n: int, d: int, D: int, d_v: int, chunk_size: int, causal: bool):
    """Chunked: the general case of the transitions' chunked count, channel decays."""
    flops = chunked_cost(n, D, d_v, chunk_size, width=D, general=True)
    return flops + checks(n, D, d_v, 3 * D), D * d_v
