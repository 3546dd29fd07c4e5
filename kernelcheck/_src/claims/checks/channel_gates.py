"""Claim checks of the group "The recurrences people ship": per-channel gates (C21).

Per-channel gates (GLA, HGRN-2, RWKV-6): the recurrent, parallel and chunked
forms agree within their error bounds for gates on the key channels, on the
value channels, gates of exactly 0 and near 0 or 1, and RWKV-6's bonus; with
``a_t = g_t 1`` they are the gated forms of C20; a gate of 0 resets the
state; a state handed over at any cut gives one pass's outputs and state; and
every form is within its bound of the recurrence in 50-digit arithmetic.
"""

from __future__ import annotations

import numpy as np

from kernelcheck._src.attention.common.spec import SpecOptions
from kernelcheck._src.attention.families.channel_gated import bound as channel_bound
from kernelcheck._src.attention.families.channel_gated import forms as channel
from kernelcheck._src.attention.families.channel_gated.reference import ChannelGatedSpec
from kernelcheck._src.attention.families.gated import bound as gated_bound
from kernelcheck._src.attention.families.gated import forms as gated
from kernelcheck._src.claims.checks.common import (
    Check,
    agree,
    all_verdict,
    fmt,
    pick,
    qkv,
    statement,
)

__all__ = ["CHECKS", "check_c21"]


def _configurations(n: int, D: int, d_v: int, rng) -> dict:
    """Key gates, value gates and bonus of each regime checked, by description."""
    a = rng.uniform(0.3, 1.0, (n, D))
    b = rng.uniform(0.3, 1.0, (n, d_v))
    zeros = a.copy()
    zeros[n // 3, 0] = 0.0
    zeros[(2 * n) // 3, :] = 0.0
    u = rng.standard_normal(D)
    return {
        "key gates in (0.3, 1) (GLA)": (a, None, None),
        "key and value gates": (a, b, None),
        "key gates with exact zeros (resets)": (zeros, b, None),
        "key gates within 1e-6 of 0": (rng.uniform(1e-7, 1e-6, (n, D)), None, None),
        "key gates within 1e-6 of 1": (1.0 - rng.uniform(0.0, 1e-6, (n, D)), None, None),
        "key gates and the bonus u (RWKV-6)": (a, None, u),
        "value gates only, one key channel (HGRN)": (None, b, None),
    }


def _forms_rows(q, k, V, configs, level) -> tuple[list[dict], float]:
    """Recurrent = chunked (C = 1, 7, 64) = parallel (not at the thorough size), per regime."""
    rows, worst = [], 0.0
    ones = np.ones(q.shape[:-1] + (1,))
    for label, (a, b, u) in configs.items():
        qq, kk = (ones, ones) if a is None else (q, k)
        args = (qq, kk, V, a, b, u)
        tol = channel_bound.channel_gated_error_bound(*args)
        ref = channel.channel_gated_recurrent(*args)
        outs = {
            f"chunked C={c}": channel.channel_gated_chunked(*args, chunk_size=c) for c in (1, 7, 64)
        }
        if level != "thorough":
            outs["parallel"] = channel.channel_gated_parallel(*args)
        for name, out in outs.items():
            row, r = agree(f"{name} = recurrent ({label})", out, ref, tol)
            rows.append(row)
            worst = max(worst, r)
    return rows, worst


def _special_rows(q, k, V, rng) -> tuple[list[dict], float]:
    """a_t = g_t 1 is C20; gates of 0 on every channel restart the outputs from that token."""
    n, D = q.shape
    rows, worst = [], 0.0
    g = rng.uniform(0.3, 1.0, n)
    a = np.repeat(g[:, None], D, axis=1)
    tol = channel_bound.channel_gated_error_bound(q, k, V, a) + gated_bound.gated_error_bound(
        q, k, V, g
    )
    out = channel.channel_gated_chunked(q, k, V, a)
    row, r = agree(
        "a_t = g_t 1 gives C20 (= gated_chunked)", out, gated.gated_chunked(q, k, V, g), tol / 2
    )
    rows.append(row)
    worst = max(worst, r)
    z = n // 2
    reset = rng.uniform(0.3, 1.0, (n, D))
    reset[z] = 0.0
    out = channel.channel_gated_chunked(q, k, V, reset)
    fresh = channel.channel_gated_recurrent(q[z:], k[z:], V[z:], reset[z:])
    tol = channel_bound.channel_gated_error_bound(q, k, V, reset)[z:]
    tol = tol + channel_bound.channel_gated_error_bound(q[z:], k[z:], V[z:], reset[z:])
    row, r = agree(f"gates of 0 at token {z} restart the outputs there", out[z:], fresh, tol / 2)
    rows.append(row)
    worst = max(worst, r)
    return rows, worst


def _handover_rows(q, k, V, a, u) -> tuple[list[dict], float]:
    """Chunked prefill (C = 7), recurrent decode, at three cuts (one inside a chunk)."""
    n = q.shape[0]
    args = (q, k, V, a, None, u)
    one, s_one = channel.channel_gated_recurrent(*args, return_state=True)
    tol = channel_bound.channel_gated_error_bound(*args)
    s_tol = ChannelGatedSpec(SpecOptions(causal=True)).state_bound(args, np.dtype(float), n)
    rows, worst = [], 0.0
    for cut in sorted({1, n // 3, n - 1}):
        head, tail = (q[:cut], k[:cut], V[:cut], a[:cut]), (q[cut:], k[cut:], V[cut:], a[cut:])
        x, sx = channel.channel_gated_chunked(*head, None, u, chunk_size=7, return_state=True)
        y, sy = channel.channel_gated_recurrent(*tail, None, u, initial_state=sx, return_state=True)
        row, r = agree(
            f"prefill {cut} tokens, decode {n - cut}: outputs = one pass",
            np.concatenate([x, y]), one, tol,
        )  # fmt: skip
        rows.append(row)
        err = float(np.abs(sy.S - s_one.S).max())
        ok = bool((np.abs(sy.S - s_one.S) <= s_tol).all())
        ratio = float((np.abs(sy.S - s_one.S) / s_tol).max())
        rows.append(
            statement(
                f"prefill {cut} tokens, decode {n - cut}: final state = one pass",
                ok,
                f"max |S difference| {fmt(err)}, {fmt(ratio)} x 2 state bounds",
            )
        )
        worst = max(worst, r, ratio)
    return rows, worst


def _exact_row(rng) -> tuple[dict, float]:
    """Every form within its bound of the 50-digit recurrence (n = 8, gates with a zero, bonus)."""
    qk, V = rng.standard_normal((2, 8, 3)), rng.standard_normal((8, 2))
    a, b, u = rng.uniform(0, 1, (8, 3)), rng.uniform(0, 1, (8, 2)), rng.standard_normal(3)
    a[3, 1] = 0.0
    args = (qk[0], qk[1], V, a, b, u)
    exact = ChannelGatedSpec.exact_output(args, {}, True)
    tol = channel_bound.channel_gated_error_bound(*args)
    outs = [
        channel.channel_gated_recurrent(*args),
        channel.channel_gated_parallel(*args),
        channel.channel_gated_chunked(*args, chunk_size=3),
    ]
    ratio = max(float((np.abs(o - exact) / tol).max()) for o in outs)
    row = statement(
        "recurrent, parallel, chunked within the bound of the 50-digit recurrence",
        ratio <= 1.0,
        f"largest error {fmt(ratio)} x its bound",
    )
    return row, ratio


def check_c21(level: str):
    """Per-channel gates: forms agree in every regime, C20 at a_t = g_t 1, resets, hand-over."""
    n, d, d_v = pick(level, (37, 3, 2), (301, 4, 8), (1500, 6, 16))
    q, k, V = qkv(21, n, d, d_v, 0.5)
    rng = np.random.default_rng(21)
    configs = _configurations(n, d, d_v, rng)
    rows, worst = _forms_rows(q, k, V, configs, level)
    more, w = _special_rows(q, k, V, rng)
    rows += more
    a, _, u = configs["key gates and the bonus u (RWKV-6)"]
    hand, w2 = _handover_rows(q, k, V, a, u)
    exact, w3 = _exact_row(rng)
    rows += hand + [exact]
    worst = max(worst, w, w2)
    key = (
        f"per-channel forms agree in {len(configs)} regimes, reduce to C20, reset at gates of 0, "
        f"hand over at 3 cuts (n = {n}): worst {fmt(worst)} x 2 tol; exact within "
        f"{fmt(w3)} x bound"
    )
    return all_verdict(rows), key, {"n": n, "statements": rows}


#: The checks of this group, in claim order.
CHECKS: tuple[Check, ...] = (
    Check(
        "C21",
        check_c21,
        (
            "kernelcheck.attention.channel_gated_recurrent",
            "kernelcheck.attention.channel_gated_parallel",
            "kernelcheck.attention.channel_gated_chunked",
            "kernelcheck.attention.channel_gated_error_bound",
            "kernelcheck.attention.gated_chunked",
        ),
    ),
)
