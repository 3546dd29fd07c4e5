"""What a failing attention layer looks like: its output matched against known bug shapes.

When a case fails, the layer's output is compared with the outputs of a few
typical bugs computed from the same inputs in float64, by brute force from
the full weight matrix the family's specification forms
(:meth:`~kernelcheck._src.attention.common.spec.FamilySpec.scores`): a
bidirectional layer checked as causal (and the reverse), a causal mask
shifted by one, a mask without its diagonal, outputs one position off, a
blocked layer that loses the state between blocks of 16, 32, 64 or 128
tokens or drops each block's last token from it, a missing normaliser (or
one where none belongs), an eps added to the normaliser (its size fitted by
least squares, so the diagnosis names the ``stabilizer=`` to declare),
queries and keys swapped, and the family's own shapes (softmax scaled by
1/d or not at all; for gated layers a decay with one factor too many or too
few, or the previous token's gate).  The diagnosis names the closest shape
when it explains the output (within the tolerance, or at least twenty times
closer than the correct reference); otherwise it says that no known shape
matches.  Where along the tokens the output stops agreeing is said by
:func:`~kernelcheck._src.verify.attention.localise.localise`.
"""

from __future__ import annotations

import math

import numpy as np

from kernelcheck._src.verify.attention.localise import BLOCKS

__all__ = ["diagnose", "name_closest", "MAX_DIAGNOSIS_N"]

#: Longest sequence diagnosed (the weight matrix is formed whole: n^2 numbers per batch entry).
MAX_DIAGNOSIS_N = 1024

#: How much closer than the reference a bug shape must be to be named without fitting.
_CLOSER = 20.0


def _block_shapes(spec, W, V, tril, normalize, base) -> dict:
    """Blocked layers that lose what one block hands the next, for the block sizes layers use.

    Each block of ``b`` tokens computed alone (the state carried between
    blocks lost), and the carried state missing each block's last token.
    """
    n = tril.shape[0]
    i, j = np.arange(n)[:, None], np.arange(tril.shape[1])[None, :]
    out = {}
    for b in sorted(BLOCKS):
        if n <= b:
            continue
        alone = tril & (i // b == j // b)
        out[
            f"each block of {b} tokens computed alone (the state carried between blocks is lost)"
        ] = spec.weigh(W, V, alone, normalize, base)
        dropped = tril & ~((j % b == b - 1) & (j // b < i // b))
        out[f"the state carried between blocks of {b} tokens misses each block's last token"] = (
            spec.weigh(W, V, dropped, normalize, base)
        )
    return out


def _stabilizer_shape(spec, W, V, mask, normalize, base, got) -> dict:
    """``num / (den + eps)``, ``eps`` fitted by least squares: an eps added to the normaliser.

    Only for the normalised families with an explicit normaliser (a kernel or
    a feature map: softmax's normaliser depends on the layer's own shift);
    ``got (den + eps) = num`` gives ``eps = sum got (num - got den) / sum got^2``.
    """
    options = spec.options
    if not normalize or (options.kernel is None and options.phi_q is None):
        return {}
    num = spec.weigh(W, V, mask, False, base)
    den = spec.weigh(W, np.ones(V.shape[:-1] + (1,)), mask, False, base)
    eps = float(np.sum(got * (num - got * den)) / np.sum(got * got))
    if not (eps > 0 and np.all(den + eps > 0)):
        return {}
    label = (
        f"a normaliser with an eps of {eps:.2g} added, num / (den + eps) (declare "
        f"stabilizer={eps:.2g} if the layer means it)"
    )
    return {label: num / (den + eps)}


def _candidates(spec, args, kw, normalize, decays, got):
    V = args[2]
    n, m = args[0].shape[-2], args[1].shape[-2]
    tril = np.tril(np.ones((n, m), dtype=bool))
    full = np.ones((n, m), dtype=bool)
    W = spec.scores(args, kw)
    base = decays["correct"]
    mask = tril if spec.causal else full
    if W is None:  # a family without a weight matrix: its own shapes only
        return spec.bug_shapes(args, kw, mask, normalize)
    out = {}
    if spec.causal:
        out["a bidirectional layer (no causal mask)"] = spec.weigh(W, V, full, normalize, None)
        out["a causal mask shifted by +1 (row i also sees token i + 1)"] = spec.weigh(
            W, V, np.tril(full, 1), normalize, base
        )
        out["a causal mask without its diagonal (row i sees only j < i)"] = spec.weigh(
            W, V, np.tril(full, -1), normalize, base
        )
        correct = spec.weigh(W, V, mask, normalize, base)
        late = np.concatenate([np.zeros_like(correct[..., :1, :]), correct[..., :-1, :]], -2)
        early = np.concatenate([correct[..., 1:, :], np.zeros_like(correct[..., :1, :])], -2)
        out["outputs one position late (row i holds row i - 1's output)"] = late
        out["outputs one position early (row i holds row i + 1's output)"] = early
        out.update(_block_shapes(spec, W, V, tril, normalize, base))
    else:
        out["a causal layer checked as bidirectional"] = spec.weigh(W, V, tril, normalize, None)
    if normalize:
        out["a missing normaliser (the weighted sum is not divided)"] = spec.weigh(
            W, V, mask, False, base
        )
    else:
        out["a normaliser where none belongs (the output is divided by the weights' sum)"] = (
            spec.weigh(W, V, mask, True, base)
        )
    if n == m:
        out["queries and keys swapped"] = spec.weigh(
            spec.scores(args, kw, swap=True), V, mask, normalize, base
        )
    out.update(spec.bug_shapes(args, kw, mask, normalize))
    out.update(_stabilizer_shape(spec, W, V, mask, normalize, base, got))
    for label, logd in decays.items():
        if label != "correct":
            out[label] = spec.weigh(W, V, mask, normalize, logd)
    return out


def diagnose(spec, args, kw, got: np.ndarray, tol: np.ndarray, extras=None, reference=None) -> str:
    """The bug shape ``got`` matches best, in words ('' when the reference itself fits).

    ``reference`` is the reference output, used as the correct output of a
    family without a weight matrix (its
    :meth:`~kernelcheck._src.attention.common.spec.FamilySpec.scores` is None).
    """
    n = args[0].shape[-2]
    if n > MAX_DIAGNOSIS_N:
        return f"no diagnosis beyond n = {MAX_DIAGNOSIS_N}"
    normalize = spec.normalize
    try:
        with np.errstate(all="ignore"):
            decays = spec.decays(extras or {}, n)
            cands = _candidates(spec, args, kw, normalize, decays, got)
            correct = _correct(spec, args, kw, normalize, decays["correct"], reference)
    except Exception:  # noqa: BLE001 - a diagnosis never turns a report into a crash
        return ""
    return name_closest(got, tol, cands, correct)


def name_closest(got: np.ndarray, tol: np.ndarray, cands: dict, correct: np.ndarray) -> str:
    """The candidate ``got`` matches within ``tol`` (or twenty times closer than ``correct``).

    Parameters
    ----------
    got : numpy.ndarray
        What the layer gave.
    tol : numpy.ndarray
        The tolerance of each entry.
    cands : dict
        Outputs (or states) of known bugs, by description.
    correct : numpy.ndarray
        The reference.

    Returns
    -------
    str
        The diagnosis in words.
    """
    scale = np.where(tol > 0, tol, np.inf)

    def ratio(x):
        with np.errstate(all="ignore"):
            r = np.abs(got - x) / scale
        r = np.where(np.isnan(r), np.inf, r)
        return float(np.max(r)) if r.size else 0.0

    ref_ratio = ratio(correct)
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


def _correct(spec, args, kw, normalize, base, reference):
    n, m = args[0].shape[-2], args[1].shape[-2]
    mask = np.tril(np.ones((n, m), bool)) if spec.causal else np.ones((n, m), bool)
    W = spec.scores(args, kw)
    if W is None:
        return reference
    return spec.weigh(W, args[2], mask, normalize, base)
