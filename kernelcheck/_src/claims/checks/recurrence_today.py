"""Claim checks of the group "The recurrence, as users build it today" (C19, C20).

Unnormalised and gated linear attention: the recurrent, parallel and chunked
forms agree within their error bounds, a state handed over at any cut point
(prefill with the chunked form, decode with the recurrence) gives the same
outputs and final state as one pass, and g = 1 reduces the gated forms to
C14/C19.
"""

from __future__ import annotations

import numpy as np

from kernelcheck._src.attention.families.gated import bound as gated_bound
from kernelcheck._src.attention.families.gated import forms as gated
from kernelcheck._src.attention.families.linear import bound as linear_bound
from kernelcheck._src.attention.families.linear import forms as linear
from kernelcheck._src.claims.checks.common import (
    Check,
    agree,
    all_verdict,
    fmt,
    pick,
    qkv,
    statement,
)
from kernelcheck._src.core.rounding import gamma
from kernelcheck._src.kernels.combinators import exp
from kernelcheck._src.kernels.leaves import Linear

__all__ = ["CHECKS", "check_c19", "check_c20"]


def _handover_rows(
    run, one_pass, state_bound: float, n: int, label: str
) -> tuple[list[dict], float]:
    """Prefill with the chunked form, decode the rest with the recurrence, at several cuts.

    ``run(lo, hi, state, form)`` runs tokens ``lo:hi`` from ``state`` and
    returns ``(out, final state, tol)``; ``one_pass = (out, state, tol)``.
    """
    rows, worst = [], 0.0
    out1, state1, tol1 = one_pass
    for cut in sorted({1, n // 3, n - 1}):
        a, sa, ta = run(0, cut, None, "chunked")
        b, sb, tb = run(cut, n, sa, "recurrent")
        row, r = agree(
            f"{label}: prefill {cut} tokens, decode {n - cut}: outputs = one pass",
            np.concatenate([a, b], axis=-2),
            out1,
            np.maximum(np.concatenate([ta, tb], axis=-2), tol1),
        )
        rows.append(row)
        serr = float(np.abs(sb.S - state1.S).max())
        rows.append(
            statement(
                f"{label}: prefill {cut} tokens, decode {n - cut}: final state = one pass",
                serr <= 2.0 * state_bound,
                f"max |S difference| {fmt(serr)} <= 2 x {fmt(state_bound)}",
            )
        )
        worst = max(worst, r, serr / (2.0 * state_bound) if state_bound > 0 else 0.0)
    return rows, worst


def _state_tol(pk, V) -> float:
    """Bound on the rounding of ``S = sum_j d_j phi(k_j) v_j^T`` (decays d_j <= 1) in any order.

    Each term passes through at most 3n + 8 roundings in the chunked,
    recurrent and decayed summation orders, so ``gamma_(3n+8) max |phi(K)|^T |V|``
    bounds every entry's error.
    """
    n = pk.shape[-2]
    return float(gamma(3 * n + 8) * (np.abs(pk).T @ np.abs(V)).max())


def check_c19(level: str):
    """Unnormalised: recurrent = parallel = chunked; a hand-over at any cut = one pass."""
    n, d, d_v = pick(level, (37, 3, 2), (301, 4, 8), (1500, 6, 16))
    Q, K_, V = qkv(19, n, d, d_v, 0.5)
    phi = exp(Linear(), order=2).features()
    pq, pk = phi(Q), phi(K_)
    tol = linear_bound.linear_error_bound(pq, pk, V, causal=True, normalize=False)
    ref = linear.parallel(pq, pk, V, causal=True, normalize=False)
    rec, state = linear.recurrent(pq, pk, V, normalize=False, return_state=True)
    rows, worst = [], 0.0
    outs = {"recurrent": rec}
    for c in (1, 7, 64, n):
        outs[f"chunked C={c}"] = linear.chunked(pq, pk, V, chunk_size=c, normalize=False)
    for label, out in outs.items():
        row, r = agree(f"{label} = parallel causal, unnormalised", out, ref, tol)
        rows.append(row)
        worst = max(worst, r)

    def run(lo, hi, st, form):
        f = linear.chunked if form == "chunked" else linear.recurrent
        a, b, v = pq[lo:hi], pk[lo:hi], V[lo:hi]
        out, new = f(a, b, v, normalize=False, initial_state=st, return_state=True)
        t = linear_bound.linear_error_bound(a, b, v, causal=True, normalize=False, initial_state=st)
        return out, new, t

    more, w = _handover_rows(run, (rec, state, tol), _state_tol(pk, V), n, "state hand-over")
    rows += more
    worst = max(worst, w)
    key = f"unnormalised forms agree and hand over at 3 cuts, n = {n}: worst {fmt(worst)} x 2 tol"
    return all_verdict(rows), key, {"n": n, "statements": rows}


def _gate_regime_rows(pq, pk, V, gate_sets) -> tuple[list[dict], float]:
    """Gated recurrent and chunked = gated parallel, for every gate regime and both kinds."""
    rows, worst = [], 0.0
    for gname, g in gate_sets.items():
        for normalize in (False, True):
            kind = "normalised" if normalize else "unnormalised"
            tol = gated_bound.gated_error_bound(pq, pk, V, g, normalize=normalize)
            ref = gated.gated_parallel(pq, pk, V, g, normalize=normalize)
            rec = gated.gated_recurrent(pq, pk, V, g, normalize=normalize)
            outs = {"recurrent": rec}
            for c in (1, 7, 64):
                outs[f"chunked C={c}"] = gated.gated_chunked(
                    pq, pk, V, g, chunk_size=c, normalize=normalize
                )
            for label, out in outs.items():
                row, r = agree(f"{label} = parallel ({gname}, {kind})", out, ref, tol)
                rows.append(row)
                worst = max(worst, r)
    return rows, worst


def check_c20(level: str):
    """Gated: recurrent = parallel (decayed weights) = chunked; hand-over; g = 1 is C14/C19."""
    n, d, d_v = pick(level, (37, 3, 2), (301, 4, 8), (1500, 6, 16))
    Q, K_, V = qkv(20, n, d, d_v, 0.5)
    phi = exp(Linear(), order=2).features()
    pq, pk = phi(Q), phi(K_)
    rng = np.random.default_rng(20)
    gate_sets = {
        "per-token gates in (0.3, 1)": rng.uniform(0.3, 1.0, size=n),
        "a constant decay 0.9 (retention)": np.full(n, 0.9),
        "gates within 1e-6 of 0": rng.uniform(1e-7, 1e-6, size=n),
        "gates within 1e-6 of 1": 1.0 - rng.uniform(0.0, 1e-6, size=n),
    }
    rows, worst = _gate_regime_rows(pq, pk, V, gate_sets)
    g = gate_sets["per-token gates in (0.3, 1)"]
    rec, state = gated.gated_recurrent(pq, pk, V, g, return_state=True)
    tol = gated_bound.gated_error_bound(pq, pk, V, g)

    def run(lo, hi, st, form):
        f = gated.gated_chunked if form == "chunked" else gated.gated_recurrent
        a, b, v, gg = pq[lo:hi], pk[lo:hi], V[lo:hi], g[lo:hi]
        out, new = f(a, b, v, gg, initial_state=st, return_state=True)
        return out, new, gated_bound.gated_error_bound(a, b, v, gg, initial_state=st)

    more, w = _handover_rows(run, (rec, state, tol), _state_tol(pk, V), n, "gated hand-over")
    rows += more
    worst = max(worst, w)
    for normalize in (False, True):
        plain = linear.chunked(pq, pk, V, normalize=normalize)
        ones = gated.gated_chunked(pq, pk, V, 1.0, normalize=normalize)
        tol = linear_bound.linear_error_bound(pq, pk, V, causal=True, normalize=normalize)
        claim = "C14" if normalize else "C19"
        row, r = agree(f"g = 1 gives {claim} (gated chunked = chunked)", ones, plain, tol)
        rows.append(row)
        worst = max(worst, r)
    key = (
        f"gated forms agree for 4 gate regimes, hand over, reduce to C14/C19 at g = 1 (n = {n}): "
        f"worst {fmt(worst)} x 2 tol"
    )
    return all_verdict(rows), key, {"n": n, "statements": rows}


#: The checks of this group, in claim order.
CHECKS: tuple[Check, ...] = (
    Check(
        "C19",
        check_c19,
        (
            "kernelcheck.attention.recurrent",
            "kernelcheck.attention.parallel",
            "kernelcheck.attention.chunked",
            "kernelcheck.attention.linear_error_bound",
        ),
    ),
    Check(
        "C20",
        check_c20,
        (
            "kernelcheck.attention.gated_recurrent",
            "kernelcheck.attention.gated_parallel",
            "kernelcheck.attention.gated_chunked",
            "kernelcheck.attention.gated_error_bound",
        ),
    ),
)
