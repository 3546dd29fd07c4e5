"""Operation counts and state sizes of Gated DeltaNet's forms (claims C3, C11, C22, C23).

As the delta rule's (:mod:`~kernelcheck._src.attention.families.delta.cost`),
with the decay of the state (``D d_v`` a token, or per chunk) and the
chunk's decays of one gate per token; building the transitions costs
``n (D + d_v)`` (``beta v``, ``alpha beta k``).
"""

from __future__ import annotations

from kernelcheck._src.attention.common.transitions import chunked_cost, steps_cost
from kernelcheck._src.attention.families.delta.cost import checks


def gated_delta_recurrent_cost(n: int, d: int, D: int, d_v: int, chunk_size: int, causal: bool):
    """Recurrent: ``n (7 D d_v + 2 d_v)`` and the checks; state ``D d_v`` (C11)."""
    return steps_cost(n, D, d_v, decay=True, dplr=False) + checks(n, D, d_v, 2), D * d_v


def gated_delta_chunked_cost(n: int, d: int, D: int, d_v: int, chunk_size: int, causal: bool):
    """Chunked: the transitions' chunked count with one decay per token."""
    flops = chunked_cost(n, D, d_v, chunk_size, width=1, general=False)
    return flops + n * (D + d_v) + checks(n, D, d_v, 2), D * d_v


def gated_delta_parallel_cost(n: int, d: int, D: int, d_v: int, chunk_size: int, causal: bool):
    """Parallel: the chunked count with one chunk of n tokens."""
    return gated_delta_chunked_cost(n, d, D, d_v, n, causal)[0], n * (D + d_v)
