"""Terms of the linear-type bound (``attention/common/bounds.py``) its holding tests cannot see.

The linear and gated families share this bound; it is checked here through
``linear_error_bound``, against its docstring.  A bound that is too loose or
too tight by a missing term still "holds" on most inputs; these tests build
inputs on which one documented term dominates and require the bound to
contain it:

* the initial state (C19's hand-over): with ``|S0|`` a million times the
  increments, the unnormalised bound is at least ``gamma_k |phi_q| |S0|``
  (``k = 2 n + 2 D + 4``), the state's share of ``E_num``;
* gradual underflow: with subnormal query features, large keys and values of
  order 1, the product term is negligible and the bound must contain the
  underflow term ``3 n D eta (1 + max |phi_q|)(1 + max |phi_k|)(1 + max |V|)``
  (unnormalised: ``|V|``, not ``[|V|, 1]``), every factor included.
"""

from __future__ import annotations

import numpy as np

from kernelcheck._src.core.rounding import eta, gamma
from kernelcheck.attention import State, linear_error_bound


def test_the_initial_state_enters_the_unnormalised_bound():
    rng = np.random.default_rng(19)
    n, D, dv = 16, 4, 3
    pq, pk = rng.random((n, D)) + 0.1, rng.random((n, D)) + 0.1
    V = rng.normal(size=(n, dv))
    S0 = 1e6 * (rng.random((D, dv)) + 0.5)
    state = State(S0)  # unnormalised: no z
    with_state = linear_error_bound(pq, pk, V, causal=True, normalize=False, initial_state=state)
    without = linear_error_bound(pq, pk, V, causal=True, normalize=False)
    share = gamma(2 * n + 2 * D + 4) * (np.abs(pq) @ np.abs(S0))
    assert (without < share).all()  # the test can tell: the state's share dominates
    assert (with_state >= share).all()


def test_the_underflow_term_has_every_factor():
    n, D, dv = 8, 3, 2
    pq = np.full((n, D), 1e-310)  # subnormal float64
    pk = np.full((n, D), 1e6)
    V = np.ones((n, dv))
    b = linear_error_bound(pq, pk, V, normalize=False)
    under = 3 * n * D * eta(np.float64) * (1 + 1e-310) * (1 + 1e6) * (1 + 1.0)
    product = gamma(2 * n + 2 * D + 4) * (np.abs(pq) @ (np.abs(pk).T @ np.abs(V)))
    assert (product < under / 100).all()  # the underflow term dominates
    assert (b >= under).all()
    assert (b <= 2 * (under + product)).all()
