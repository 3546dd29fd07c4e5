"""The tolerance on a gated layer's final state, read from the error bound of its outputs.

Row ``c`` of the final state ``S_n`` (key-major, ``(..., D, d_v)``) is what
the unit query ``e_c`` reads at the last token, so the entrywise bound of
that output bounds the row: the public bounds of the gated families
(:func:`~kernelcheck.attention.gated_error_bound`,
:func:`~kernelcheck.attention.channel_gated_error_bound`) then cover a state
handed over before the first token too.  The read-out's own ``D`` roundings
are counted in that bound, so it is a little wider than the state's.
"""

from __future__ import annotations

import numpy as np

from kernelcheck.attention import State


def state_tolerance(bound, phi_q, *args, initial_state=None, dtype=None, **kw) -> np.ndarray:
    """``bound``'s float64 share plus its share in ``dtype``, on every entry of ``S_n``.

    ``bound(phi_q, *args, initial_state=..., dtype=..., **kw)`` is a gated
    family's error bound; the arrays of ``args`` are broadcast over a new
    leading axis of the ``D`` unit queries.
    """
    D = phi_q.shape[-1]
    units = np.zeros((D,) + phi_q.shape)
    units[..., -1, :] = np.eye(D).reshape((D,) + (1,) * (phi_q.ndim - 2) + (D,))
    lead = [None if a is None else np.broadcast_to(a, (D,) + np.shape(a)) for a in args]
    if initial_state is not None:
        S0 = np.asarray(initial_state.S)
        kw["initial_state"] = State(np.broadcast_to(S0, (D,) + S0.shape))
    total = bound(units, *lead, dtype=dtype, **kw) + bound(units, *lead, **kw)
    return np.moveaxis(total[..., -1, :], 0, -2)
