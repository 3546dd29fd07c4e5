"""The reference a layer is compared with, and its error model, as ``verify.attention`` builds it.

The options select one family of the attention registry
(:data:`~kernelcheck._src.attention.registry.FAMILIES`): softmax (default),
kernelized (``kernel=``), linear (``feature_map=``, normalised or not,
C10/C19), gated (``feature_map=`` with ``decay=``, C20), ...  The family's
first form is the reference, evaluated in float64 on exactly the inputs the
layer received; its specification
(:class:`~kernelcheck._src.attention.common.spec.FamilySpec`) builds the
form's arguments.  The tolerance of every entry is the form's a-priori bound
for the layer's rounding model plus the same bound in float64 for the
reference itself, plus the exact effect of a declared stabiliser.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernelcheck._src.attention.common.inputs import scale_iv
from kernelcheck._src.attention.common.spec import SpecOptions
from kernelcheck._src.attention.registry import Family, select_family
from kernelcheck._src.core.rounding import RoundingModel, gamma

__all__ = ["Reference", "PackedReference", "PACKED", "scale_option"]

#: The key of a case's sequence offsets among its per-token inputs, and the keyword
#: ``fn`` gets them by (flash-linear-attention's name).
PACKED = "cu_seqlens"


class Reference:
    """The reference form of the selected family, with its error model.

    Parameters
    ----------
    family : Family
        The family the options select.
    options : SpecOptions
        The options its specification is built from.
    """

    def __init__(self, family: Family, options: SpecOptions):
        self.family = family
        self.spec = family.spec(options)
        self.form = family.reference
        self.causal = options.causal
        self.stabilizer = options.stabilizer

    @classmethod
    def of(cls, *, causal: bool, feature_map=None, selecting=(), **options) -> Reference:
        """The reference for validated options: the family of the selecting options given.

        ``feature_map`` is one map or a pair ``(phi_q, phi_k)``; ``selecting``
        names further selecting options given (``"decay"``); the other
        keywords are fields of :class:`SpecOptions`.
        """
        given = set(selecting)
        if options.get("kernel") is not None:
            given.add("kernel")
        phi_q = phi_k = None
        if feature_map is not None:
            given.add("feature_map")
            phi_q, phi_k = feature_map if isinstance(feature_map, (tuple, list)) else (
                feature_map, feature_map
            )  # fmt: skip
        family = select_family(frozenset(given))
        return cls(family, SpecOptions(causal=causal, phi_q=phi_q, phi_k=phi_k, **options))

    @property
    def normalize(self) -> bool:
        """Whether the reference divides by a normaliser."""
        return self.spec.normalize

    @property
    def name(self) -> str:
        """The reference in words (no object addresses)."""
        return self.spec.describe()

    @property
    def model(self) -> str:
        """The reference form's error bound in one line."""
        return self.form.model

    def args(self, Q, K, V, extras) -> tuple[tuple, dict]:
        """The form's leading arguments and keyword options for one case."""
        return self.spec.arguments(Q, K, V, extras)

    def output(self, args, kw):
        """The reference output (raises BadNormalizer / NumericalFailure where undefined).

        With a declared stabiliser ``eps`` it is the stabilised output
        ``num / (den + eps) = a den / (den + eps)``, formed in float64 from
        the reference's own output and normalisers: exactly what the layer
        computes, not a tolerance widened around the plain output.
        """
        out = self.form.call(*args, causal=self.causal, **kw)
        if not self.stabilizer:
            return out
        den = self.normalizers(args, kw)
        return out * (den / (den + self.stabilizer))

    def largest_intermediates(self, args, kw) -> tuple[float, float]:
        """Bounds on the magnitudes a layer stores and accumulates (see the family's spec)."""
        return self.spec.largest_intermediates(args, kw)

    def extra_ops(self, d: int) -> int:
        """Roundings per term of the layer's own feature map."""
        return self.spec.extra_ops(d)

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
        own: dict = {**self.spec.bound_options(float64=True), **kw}
        tol = bound(*args, causal=self.causal, extra_ops=extra, **own)
        layer: dict = {**self.spec.bound_options(float64=False), **kw}
        tol = tol + bound(
            *args, causal=self.causal, dtype=model, extra_ops=extra + cast_ops, **layer
        )
        if self.stabilizer:
            tol = tol + self._stabilizer_rounding(reference)
        return tol

    def vjp(self, args, kw, Q, K, V, G, model) -> list:
        """The family's reference gradients (see its specification's ``vjp``)."""
        return self.spec.vjp(args, kw, Q, K, V, G, model)

    def pieces(self, args) -> list[tuple]:
        """The form's arguments of each sequence: one sequence, as they are."""
        return [args]

    def for_case(self, extras) -> Reference | PackedReference:
        """This reference, or the packed one when the case's tokens hold several sequences."""
        offsets = extras.get(PACKED)
        return self if offsets is None else PackedReference(self, offsets)

    def normalizers(self, args, kw) -> np.ndarray:
        """The reference's normalisers, shape (..., n, 1) (float64)."""
        report = self.form.call(*args, causal=self.causal, on_bad_normalizer="report", **kw)
        return np.asarray(report.normalizer, dtype=np.float64)[..., None]

    def _stabilizer_rounding(self, reference) -> np.ndarray:
        """The float64 rounding of ``a den / (den + eps)``: three operations, ``gamma_4 |a'|``.

        The form's bound for ``num / den`` bounds the stabilised quotient's
        error too: ``den + eps >= den`` only shrinks every term divided by
        the normaliser (``eps >= 0``).
        """
        return np.abs(reference) * gamma(4)


class PackedReference:
    """The reference of packed sequences: each one on its own, the results joined.

    ``offsets`` (``cu_seqlens``: ``0 = o_0 < o_1 < ... < o_N = n``) cut the
    tokens into N sequences; no state leaks from one to the next, so the
    reference output, its tolerance and its gradients are the plain
    reference's on each piece, concatenated along the tokens, and the final
    states are stacked, one per sequence.

    Parameters
    ----------
    reference : Reference
        The reference of one sequence.
    offsets : numpy.ndarray of int
        The sequences' boundaries.
    """

    def __init__(self, reference: Reference, offsets: np.ndarray):
        self.plain = reference
        self.offsets = [int(o) for o in offsets]
        self.family, self.spec, self.form = reference.family, reference.spec, reference.form
        self.causal, self.stabilizer = reference.causal, reference.stabilizer

    def __getattr__(self, name: str):
        return getattr(self.plain, name)

    def pieces(self, args) -> list[tuple]:
        """The form's arguments of each sequence (per-token inputs cut, the others as they are)."""
        by_name = {ti.name: ti for ti in self.family.token_inputs}
        out = []
        for a, b in zip(self.offsets[:-1], self.offsets[1:], strict=True):
            head = tuple(x[..., a:b, :] for x in args[:3])
            rest = tuple(
                by_name[name].take(x, a, b) if name in by_name and x is not None else x
                for name, x in zip(self.form.requires, args[3:], strict=True)
            )
            out.append(head + rest)
        return out

    def output(self, args, kw):
        return np.concatenate([self.plain.output(p, kw) for p in self.pieces(args)], axis=-2)

    def tolerance(self, args, kw, model, cast_ops: int, reference, d: int) -> np.ndarray:
        parts = []
        for p, (a, b) in zip(self.pieces(args), zip(self.offsets[:-1], self.offsets[1:]),
                             strict=True):  # fmt: skip
            parts.append(self.plain.tolerance(p, kw, model, cast_ops, reference[..., a:b, :], d))
        return np.concatenate(parts, axis=-2)

    def largest_intermediates(self, args, kw) -> tuple[float, float]:
        sizes = [self.plain.largest_intermediates(p, kw) for p in self.pieces(args)]
        return max(s[0] for s in sizes), max(s[1] for s in sizes)

    def normalizers(self, args, kw) -> np.ndarray:
        return np.concatenate([self.plain.normalizers(p, kw) for p in self.pieces(args)], axis=-2)

    def vjp(self, args, kw, Q, K, V, G, model) -> list:
        """The family's reference gradients of each sequence, joined along the tokens."""
        joined: dict = {}
        bounds = list(zip(self.offsets[:-1], self.offsets[1:], strict=True))
        for p, (a, b) in zip(self.pieces(args), bounds, strict=True):
            cut = (Q[..., a:b, :], K[..., a:b, :], V[..., a:b, :], G[..., a:b, :])
            for name, index, r, t in self.spec.vjp(p, kw, *cut, model):
                joined.setdefault((name, index), []).append((r, t))
        return [
            (
                name,
                index,
                np.concatenate([r for r, _ in rt], -2),
                np.concatenate([t for _, t in rt], -2),
            )
            for (name, index), rt in joined.items()
        ]


def scale_option(scale: Any):
    """``scale``: None (1/sqrt(d)), a positive number, or a function of ``d``."""
    if scale is None or callable(scale):
        return scale
    return scale_iv(scale, 1)
