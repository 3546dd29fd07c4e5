"""What a failing attention layer looks like: its output matched against known bug shapes.

When a case fails, the layer's output is compared with the outputs of a few
typical bugs computed from the same inputs in float64, by brute force from
the full weight matrix: a bidirectional layer checked as causal (and the
reverse), a causal mask shifted by one, a mask without its diagonal, outputs
one position off, a missing normaliser, softmax scaled by 1/d or not at all,
queries and keys swapped, and for gated layers a decay with one factor too
many or too few or the previous token's gate.  The diagnosis names the
closest shape when it explains the output (within the tolerance, or at
least twenty times closer than the correct reference); otherwise it says
that no known shape matches.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["diagnose", "MAX_DIAGNOSIS_N"]

#: Longest sequence diagnosed (the weight matrix is formed whole: n^2 numbers per batch entry).
MAX_DIAGNOSIS_N = 1024

#: How much closer than the reference a bug shape must be to be named without fitting.
_CLOSER = 20.0


def _weights(ref, args, kw, scale_override=None, swap=False):
    """The unmasked weight matrix kappa(q_i, k_j) (softmax: the logits), shape (..., n, m)."""
    if ref.family == "softmax":
        Q, K = args[0], args[1]
        if swap:
            Q, K = K, Q
        scale = kw.get("scale")
        d = Q.shape[-1]
        s = scale_override(d) if scale_override else (1 / math.sqrt(d) if scale is None else scale)
        return Q @ np.swapaxes(K, -1, -2) * s
    if ref.family == "kernelized":
        Q, K, _, kernel = args
        if swap:
            Q, K = K, Q
        out = np.empty(Q.shape[:-1] + (K.shape[-2],))
        for idx in np.ndindex(*Q.shape[:-2]):
            out[idx] = kernel(Q[idx], K[idx])
        return out
    pq, pk = args[0], args[1]
    if swap:
        pq, pk = pk, pq
    return pq @ np.swapaxes(pk, -1, -2)


def _attend(ref, W, V, mask, normalize, log_decay=None):
    """``(W o M o D) V`` (divided by the weights' row sums when normalised); empty rows give 0."""
    if ref.family == "softmax":
        logits = np.where(mask, W, -np.inf)
        if log_decay is not None:
            logits = logits + log_decay
        m = np.max(logits, axis=-1, keepdims=True)
        m = np.where(np.isfinite(m), m, 0.0)
        with np.errstate(invalid="ignore", over="ignore"):
            E = np.where(mask, np.exp(logits - m), 0.0)
    else:
        E = np.where(mask, W, 0.0)
        if log_decay is not None:
            E = E * np.exp(np.where(mask, log_decay, -np.inf))
    num = E @ V
    if not normalize:
        return num
    den = E.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den != 0, num / np.where(den != 0, den, 1.0), 0.0)


def _log_decays(gates, n):
    """``log prod`` of the gates: the correct decay and three off-by-one variants, (..., n, n)."""
    L = np.cumsum(np.log(gates), axis=-1)
    Lp = np.concatenate([np.zeros(L.shape[:-1] + (1,)), L[..., :-1]], axis=-1)  # L_{j-1}
    logg = np.log(gates)
    i = L[..., :, None]
    return {
        "correct": i - L[..., None, :],
        "one decay factor too many: prod_{l=j..i} g_l (the gate applied after the update, "
        "or the parallel mask's exponent off by one)": i - Lp[..., None, :],
        "the previous token's gate: prod_{l=j..i-1} g_l (g_(t-1) used at step t)": i
        - logg[..., :, None]
        - Lp[..., None, :],
        "one decay factor too few: prod_{l=j+2..i} g_l": np.minimum(
            i
            - L[..., None, :]
            - np.concatenate([logg[..., 1:], np.zeros(L.shape[:-1] + (1,))], -1)[..., None, :],
            0.0,
        ),
    }


def _candidates(ref, args, kw, normalize, gates):
    V = args[2]
    n, m = args[0].shape[-2], args[1].shape[-2]
    tril = np.tril(np.ones((n, m), dtype=bool))
    full = np.ones((n, m), dtype=bool)
    W = _weights(ref, args, kw)
    decays = _log_decays(gates, n) if gates is not None else {"correct": None}
    base = decays["correct"]
    mask = tril if ref.causal else full
    out = {}
    if ref.causal:
        out["a bidirectional layer (no causal mask)"] = _attend(ref, W, V, full, normalize, None)
        out["a causal mask shifted by +1 (row i also sees token i + 1)"] = _attend(
            ref, W, V, np.tril(full, 1), normalize, base
        )
        out["a causal mask without its diagonal (row i sees only j < i)"] = _attend(
            ref, W, V, np.tril(full, -1), normalize, base
        )
        correct = _attend(ref, W, V, mask, normalize, base)
        late = np.concatenate([np.zeros_like(correct[..., :1, :]), correct[..., :-1, :]], -2)
        early = np.concatenate([correct[..., 1:, :], np.zeros_like(correct[..., :1, :])], -2)
        out["outputs one position late (row i holds row i - 1's output)"] = late
        out["outputs one position early (row i holds row i + 1's output)"] = early
    else:
        out["a causal layer checked as bidirectional"] = _attend(ref, W, V, tril, normalize, None)
    if normalize:
        out["a missing normaliser (the weighted sum is not divided)"] = _attend(
            ref, W, V, mask, False, base
        )
    else:
        out["a normaliser where none belongs (the output is divided by the weights' sum)"] = (
            _attend(ref, W, V, mask, True, base)
        )
    if n == m:
        out["queries and keys swapped"] = _attend(
            ref, _weights(ref, args, kw, swap=True), V, mask, normalize, base
        )
    if ref.family == "softmax" and kw.get("scale") is None:
        for label, s in (
            ("softmax scaled by 1/d instead of 1/sqrt(d)", lambda d: 1.0 / d),
            ("softmax logits not scaled (1 instead of 1/sqrt(d))", lambda d: 1.0),
        ):
            out[label] = _attend(ref, _weights(ref, args, kw, s), V, mask, normalize, None)
    for label, logd in decays.items():
        if label != "correct":
            out[label] = _attend(ref, W, V, mask, normalize, logd)
    return out


def diagnose(ref, args, kw, got: np.ndarray, tol: np.ndarray, gates=None) -> str:
    """The bug shape ``got`` matches best, in words ('' when the reference itself fits)."""
    n = args[0].shape[-2]
    if n > MAX_DIAGNOSIS_N:
        return f"no diagnosis beyond n = {MAX_DIAGNOSIS_N}"
    normalize = ref.normalize if ref.family in ("linear", "gated") else True
    try:
        with np.errstate(all="ignore"):
            cands = _candidates(ref, args, kw, normalize, gates)
    except Exception:  # noqa: BLE001 - a diagnosis never turns a report into a crash
        return ""
    scale = np.where(tol > 0, tol, np.inf)

    def ratio(x):
        with np.errstate(all="ignore"):
            r = np.abs(got - x) / scale
        r = np.where(np.isnan(r), np.inf, r)
        return float(np.max(r)) if r.size else 0.0

    ref_ratio = ratio(_correct(ref, args, kw, normalize, gates))
    best, best_r = None, math.inf
    for label, cand in cands.items():
        if cand.shape != got.shape or not np.isfinite(cand).all():
            continue
        r = ratio(cand)
        if r < best_r:
            best, best_r = label, r
    if best is None:
        return "no known bug shape matches"
    if best_r <= 1.0:
        return f"the output is {best}, within rounding"
    if best_r * _CLOSER <= ref_ratio:
        return f"the output is closest to {best} ({best_r:.3g} x tolerance against {ref_ratio:.3g})"
    return "no known bug shape matches"


def _correct(ref, args, kw, normalize, gates):
    n, m = args[0].shape[-2], args[1].shape[-2]
    mask = np.tril(np.ones((n, m), bool)) if ref.causal else np.ones((n, m), bool)
    base = _log_decays(gates, n)["correct"] if gates is not None else None
    with np.errstate(all="ignore"):
        return _attend(ref, _weights(ref, args, kw), args[2], mask, normalize, base)
