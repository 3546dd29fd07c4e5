"""The reference a layer is compared with, and its error model, as ``verify.attention`` builds it.

The reference is one form of the attention registry
(:data:`kernelcheck.attention.FORMS`), chosen by the options: softmax
(default), kernelized (``kernel=``), linear (``feature_map=``, normalised or
not, C10/C19) or gated (``feature_map=`` with ``decay=``, C20).  It is
evaluated in float64 on exactly the inputs the layer received; the
tolerance of every entry is the form's a-priori bound for the layer's
rounding model plus the same bound in float64 for the reference itself, plus
the exact effect of a declared stabiliser.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from kernelcheck._src.attention.inputs import scale_iv
from kernelcheck._src.attention.registry import get_form
from kernelcheck._src.core.rounding import RoundingModel, default_feature_ops, gamma
from kernelcheck._src.core.validate import as_array, as_real, call_user, check_callable, describe
from kernelcheck.errors import InvalidArgument

__all__ = ["Reference", "STORAGE_OPS"]

#: Roundings per term to the storage precision in a layer that stores in 16 bits and
#: accumulates in float32, by reference family: softmax stores its (scaled) logits, its
#: weights and its output; kernelized its Gram entries, the weighted sums and the
#: output; linear its two feature matrices, the scores or state, the sums and the
#: output; gated also its decays.
STORAGE_OPS = {"softmax": 3, "kernelized": 3, "linear": 5, "gated": 6}


class Reference:
    """The reference form chosen by the options, with its error model.

    ``gates`` (an array of shape batch + (n,)) is passed per case to the
    gated family.
    """

    def __init__(
        self,
        *,
        kernel=None,
        feature_map=None,
        causal: bool,
        scale=None,
        normalize: bool = True,
        gated: bool = False,
        stabilizer: float | None = None,
        feature_ops: int | None = None,
    ):
        self.kernel = kernel
        self.causal = causal
        self.scale = scale
        self.normalize = normalize
        self.stabilizer = stabilizer
        self.feature_ops = feature_ops
        self.phi_q, self.phi_k = _feature_pair(feature_map)
        if gated:
            self.family, form = "gated", "gated_parallel"
        elif feature_map is not None:
            self.family, form = "linear", "parallel"
        elif kernel is not None:
            self.family, form = "kernelized", "kernelized"
        else:
            self.family, form = "softmax", "softmax"
        self.form = get_form(form)

    # ----- description ----------------------------------------------------
    @property
    def name(self) -> str:
        """The reference in words (no object addresses)."""
        if self.family == "softmax":
            if self.scale is None:
                return "softmax attention (scale 1/sqrt(d))"
            if callable(self.scale):
                return f"softmax attention (scale {_callable_name(self.scale)}(d))"
            return f"softmax attention (scale {self.scale:g})"
        if self.family == "kernelized":
            return f"kernelized attention with {self.kernel!r}"
        maps = _callable_name(self.phi_q)
        if self.phi_k is not self.phi_q:
            maps = f"({maps}, {_callable_name(self.phi_k)})"
        kind = "normalised" if self.normalize else "unnormalised"
        if self.family == "gated":
            return f"gated linear attention ({kind}) with feature map {maps}"
        return f"linear attention ({kind}) with feature map {maps}"

    @property
    def model(self) -> str:
        return self.form.model

    # ----- evaluation -----------------------------------------------------
    def _phi(self, which: Callable, X: np.ndarray, name: str) -> np.ndarray:
        shape = X.shape
        flat = X.reshape(-1, shape[-1])
        P = as_array(
            call_user(which, f"`feature_map` ({name})", flat),
            f"feature_map({name})",
            dtype=np.float64,
            allow_empty=True,
        )
        if P.ndim != 2 or P.shape[0] != flat.shape[0]:
            raise InvalidArgument(
                f"`feature_map` must return an array of shape (n, D) for input of shape "
                f"(n, d), got {describe(P)} for {flat.shape}"
            )
        if not np.isfinite(P).all():
            raise InvalidArgument(f"`feature_map` returned a non-finite feature on {name}")
        return P.reshape(shape[:-1] + (P.shape[1],))

    def _scale(self, d: int):
        if callable(self.scale):
            value = call_user(self.scale, "`scale`", d)
            return as_real(value, "scale(d)", positive=True)
        return self.scale

    def args(self, Q, K, V, gates=None) -> tuple[tuple, dict]:
        """The form's leading arguments and keyword options for one case."""
        if self.family in ("linear", "gated"):
            lead: tuple = (self._phi(self.phi_q, Q, "Q"), self._phi(self.phi_k, K, "K"), V)
            kw: dict = {"normalize": self.normalize}
            if self.family == "gated":
                lead = (*lead, gates)
            return lead, kw
        if self.family == "kernelized":
            return (Q, K, V, self.kernel), {}
        return (Q, K, V), {"scale": self._scale(Q.shape[-1])}

    def output(self, args, kw):
        """The reference output (raises BadNormalizer / NumericalFailure where undefined)."""
        return self.form.call(*args, causal=self.causal, **kw)

    def largest_intermediates(self, args, kw) -> tuple[float, float]:
        """Upper bounds on the magnitudes a layer stores, and on those it accumulates.

        The first number bounds what a layer rounds to its storage format:
        linear and gated, the features, the scores ``|phi(q_i)| . max_j |phi(k_j)|``,
        the values and (unnormalised) the output; softmax, the logits (its
        weights are at most 1 after the row maximum, its output at most
        ``max |v|``); kernelized, the Gram entries.  The second bounds the
        running sums, held in the accumulation precision (``accumulate=``):
        the state ``sum_j |phi(k_j)| |[v_j, 1]|`` and the numerators
        ``|phi(q)| . state`` (full sums bound every prefix; decays are at most
        1), ``n max |v|`` for softmax, the Gram entries times ``n max |v|``.
        A layer that keeps its state in 16 bits accumulates in 16 bits, and
        declares it with ``accumulate=``.  A format whose largest number is
        below one of these cannot represent the layer's own intermediates.
        """
        with np.errstate(over="ignore"):
            if self.family in ("linear", "gated"):
                aq, ak, V = np.abs(args[0]), np.abs(args[1]), np.abs(args[2])
                W = np.concatenate([V, np.ones(V.shape[:-1] + (1,))], axis=-1)
                state = np.swapaxes(ak, -1, -2) @ W
                sums = aq @ state
                kmax = ak.max(axis=-2, keepdims=True)
                stored = max(aq.max(), ak.max(), (aq * kmax).sum(-1).max(), V.max())
                if not self.normalize:
                    stored = max(stored, sums[..., :-1].max())
                return float(stored), float(max(state.max(), sums.max()))
            n = args[1].shape[-2]
            vmax = float(np.abs(args[2]).max())
            if self.family == "softmax":
                Q, K = args[0], args[1]
                scale = kw.get("scale") or 1.0 / math.sqrt(Q.shape[-1])
                logits = scale * float(np.abs(Q).max()) * float(np.abs(K).sum(axis=-1).max())
                return max(logits, vmax), n * vmax
            G = np.abs(self.kernel(args[0].reshape(-1, args[0].shape[-1]),
                                   args[1].reshape(-1, args[1].shape[-1])))  # fmt: skip
            return max(float(G.max()), vmax), float(G.max()) * n * max(vmax, 1.0)

    def extra_ops(self, d: int) -> int:
        """Roundings per term of the layer's own feature map (2 ops: one map on each side)."""
        if self.family not in ("linear", "gated"):
            return 0
        if self.feature_ops is not None:
            return 2 * self.feature_ops
        ops = getattr(self.phi_q, "ops", None)
        if isinstance(ops, (int, np.integer)) and not isinstance(ops, bool):
            return 2 * int(ops)
        return 2 * default_feature_ops(d)

    def tolerance(
        self, args, kw, model: RoundingModel, cast_ops: int, reference, d: int
    ) -> np.ndarray:
        """Entrywise tolerance: the bound in the layer's model, in float64, and the stabiliser.

        ``cast_ops`` counts roundings the layer does to its inputs itself (2
        when it receives float64 and computes in a lower precision); ``d`` is
        the key dimension (for the default feature-map model).
        """
        extra = self.extra_ops(d)
        bound = self.form.bound
        # the float64 reference's own error only has to be small next to the layer's:
        # softmax's first bound alone bounds it without another n x n softmax pass
        if self.family == "softmax":
            tol = bound(*args, causal=self.causal, extra_ops=extra, tight=False, **kw)
        else:
            tol = bound(*args, causal=self.causal, extra_ops=extra, **kw)
        tol = tol + bound(*args, causal=self.causal, dtype=model, extra_ops=extra + cast_ops, **kw)
        if self.stabilizer:
            tol = tol + self._stabilizer_effect(args, kw, reference)
        return tol

    def _stabilizer_effect(self, args, kw, reference) -> np.ndarray:
        """``|a| eps / den``: the change ``num / den -> num / (den + eps)`` at every entry.

        Computed in float64 from the reference's own normalisers; the few
        roundings of the quotient are covered by a factor ``1 + gamma_4``.
        """
        report = self.form.call(*args, causal=self.causal, on_bad_normalizer="report", **kw)
        den = np.asarray(report.normalizer, dtype=np.float64)[..., None]
        with np.errstate(divide="ignore", invalid="ignore"):
            effect = np.abs(reference) * self.stabilizer / den
        effect = np.where(den > 0, effect, np.inf)
        return effect * (1.0 + gamma(4))


def _callable_name(f) -> str:
    if isinstance(f, type) or not callable(f):
        return repr(f)
    name = getattr(f, "__qualname__", None) or getattr(f, "__name__", None)
    if name is None or name == "<lambda>":
        cls = type(f)
        if cls.__module__.startswith("kernelcheck"):
            return repr(f)
        return "a lambda" if name == "<lambda>" else cls.__name__
    return name


def _feature_pair(feature_map) -> tuple[Any, Any]:
    """One map for both sides, or a pair ``(phi_q, phi_k)`` (performer's ``is_query`` split)."""
    if feature_map is None:
        return None, None
    if isinstance(feature_map, (tuple, list)):
        if len(feature_map) != 2:
            raise InvalidArgument(
                "`feature_map` must be one callable or a pair (phi_q, phi_k), got a sequence of "
                f"{len(feature_map)}"
            )
        return check_callable(feature_map[0], "feature_map[0]"), check_callable(
            feature_map[1], "feature_map[1]"
        )
    check_callable(feature_map, "feature_map")
    return feature_map, feature_map


def scale_option(scale: Any):
    """``scale``: None (1/sqrt(d)), a positive number, or a function of ``d``."""
    if scale is None or callable(scale):
        return scale
    return scale_iv(scale, 1)
