"""Operation counts and state sizes of Kimi Delta Attention's forms (claims C3, C11, C23).

As the delta rule's (:mod:`~kernelcheck._src.attention.families.delta.cost`),
with the decay of every key channel (``D d_v`` a token, or per chunk) and
the chunk's factored channel decays; building the transitions costs
``n (2 D + d_v)`` (``beta v``, ``alpha o k`` and its scaling).
"""

from __future__ import annotations

from kernelcheck._src.attention.common.transitions import chunked_cost, steps_cost
from kernelcheck._src.attention.families.delta.cost import checks


def kda_recurrent_cost(n: int, d: int, D: int, d_v: int, chunk_size: int, causal: bool):
    """Recurrent: ``n (7 D d_v + 2 d_v)`` and the checks; state ``D d_v`` (C11)."""
    return steps_cost(n, D, d_v, decay=True, dplr=False) + checks(n, D, d_v, D + 1), D * d_v


def kda_chunked_cost(n: int, d: int, D: int, d_v: int, chunk_size: int, causal: bool):
    """Chunked: the transitions' chunked count with a decay on every key channel."""
    flops = chunked_cost(n, D, d_v, chunk_size, width=D, general=False)
    return flops + n * (2 * D + d_v) + checks(n, D, d_v, D + 1), D * d_v
