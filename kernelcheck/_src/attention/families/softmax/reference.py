"""How ``verify.attention`` meets a softmax layer: its reference, range and bug shapes (C1)."""

from __future__ import annotations

import math
from collections.abc import Callable

import mpmath
import numpy as np

from kernelcheck._src.attention.common.exact import (
    DIGITS,
    mp_dot,
    mp_matrix,
    over_batch,
    weighted_rows,
)
from kernelcheck._src.attention.common.spec import FamilySpec, callable_name, weighted_average
from kernelcheck._src.attention.families.softmax.vjp import softmax_vjp_with_bounds
from kernelcheck._src.core.calls import call_user
from kernelcheck._src.core.validate import as_real

__all__ = ["SoftmaxSpec"]


class SoftmaxSpec(FamilySpec):
    """Exact softmax attention, ``softmax(scale Q K^T) V`` (claim C1)."""

    gradients = ("dQ", "dK", "dV")

    @classmethod
    def example_arguments(cls, rng, n: int, d: int, D: int, d_v: int, batch=()) -> tuple:
        """Gaussian queries, keys and values."""
        Q, K = rng.standard_normal((2, *batch, n, d))
        return (Q, K, rng.standard_normal((*batch, n, d_v)))

    @classmethod
    def exact_output(cls, args, kw, causal: bool) -> np.ndarray:
        """Softmax attention with the exact scale, logits less their row maximum, in mpmath."""
        given = kw.get("scale")

        def one(Q, K, V):
            Qm, Km = mp_matrix(Q), mp_matrix(K)
            with mpmath.workdps(DIGITS):
                d = Q.shape[-1]
                sc = mpmath.mpf(1) / mpmath.sqrt(d) if given is None else mpmath.mpf(given)
                logits = [[sc * mp_dot(q, k) for k in Km] for q in Qm]
                top = [max(row[: i + 1] if causal else row) for i, row in enumerate(logits)]

            def weight(i, j):
                return mpmath.exp(logits[i][j] - top[i])

            return weighted_rows(weight, V, Q.shape[0], causal=causal, normalize=True)

        return over_batch(one, *(np.asarray(a, dtype=np.float64) for a in args[:3]))

    def describe(self) -> str:
        scale = self.options.scale
        if scale is None:
            return "softmax attention (scale 1/sqrt(d))"
        if callable(scale):
            return f"softmax attention (scale {callable_name(scale)}(d))"
        return f"softmax attention (scale {scale:g})"

    def _scale(self, d: int):
        scale = self.options.scale
        if callable(scale):
            return as_real(call_user(scale, "`scale`", d), "scale(d)", positive=True)
        return scale

    def arguments(self, Q, K, V, extras) -> tuple[tuple, dict]:
        return (Q, K, V), {"scale": self._scale(Q.shape[-1])}

    def largest_intermediates(self, args, kw) -> tuple[float, float]:
        """The logits (weights are at most 1 after the row maximum); ``n max |v|`` accumulated."""
        with np.errstate(over="ignore"):
            Q, K, V = args[0], args[1], args[2]
            vmax = float(np.abs(V).max())
            scale = kw.get("scale") or 1.0 / math.sqrt(Q.shape[-1])
            logits = scale * float(np.abs(Q).max()) * float(np.abs(K).sum(axis=-1).max())
            return max(logits, vmax), K.shape[-2] * vmax

    def bound_options(self, *, float64: bool) -> dict:
        # the float64 reference's own error only has to be small next to the layer's:
        # the first bound alone bounds it without another n x n softmax pass
        return {"tight": False} if float64 else {}

    def scores(self, args, kw, *, swap: bool = False, scale: Callable | None = None):
        Q, K = args[0], args[1]
        if swap:
            Q, K = K, Q
        d = Q.shape[-1]
        given = kw.get("scale")
        s = scale(d) if scale else (1 / math.sqrt(d) if given is None else given)
        return Q @ np.swapaxes(K, -1, -2) * s

    def weigh(self, W, V, mask, normalize: bool, log_decay=None) -> np.ndarray:
        """Softmax of the masked logits ``W`` (plus a log decay) times ``V``."""
        logits = np.where(mask, W, -np.inf)
        if log_decay is not None:
            logits = logits + log_decay
        m = np.max(logits, axis=-1, keepdims=True)
        m = np.where(np.isfinite(m), m, 0.0)
        with np.errstate(invalid="ignore", over="ignore"):
            E = np.where(mask, np.exp(logits - m), 0.0)
        return weighted_average(E, V, normalize)

    def bug_shapes(self, args, kw, mask, normalize: bool) -> dict:
        """A logit scale of 1/d or 1 in place of the default 1/sqrt(d)."""
        if kw.get("scale") is not None:
            return {}
        V = args[2]
        return {
            label: self.weigh(self.scores(args, kw, scale=s), V, mask, normalize)
            for label, s in (
                ("softmax scaled by 1/d instead of 1/sqrt(d)", lambda d: 1.0 / d),
                ("softmax logits not scaled (1 instead of 1/sqrt(d))", lambda d: 1.0),
            )
        }

    def vjp(self, args, kw, Q, K, V, G, model):
        """dQ, dK, dV of :func:`~kernelcheck.attention.softmax_vjp`, bounded (layer and float64)."""
        ref, (tol,) = softmax_vjp_with_bounds(
            Q, K, V, G, causal=self.causal, scale=kw.get("scale"), dtypes=(model,),
            plus_float64=True,
        )  # fmt: skip
        names = ("dQ", "dK", "dV")
        return [(name, i, r, t) for i, (name, r, t) in enumerate(zip(names, ref, tol, strict=True))]
