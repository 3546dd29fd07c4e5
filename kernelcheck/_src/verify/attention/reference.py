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

__all__ = ["Reference", "scale_option"]


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


def scale_option(scale: Any):
    """``scale``: None (1/sqrt(d)), a positive number, or a function of ``d``."""
    if scale is None or callable(scale):
        return scale
    return scale_iv(scale, 1)
