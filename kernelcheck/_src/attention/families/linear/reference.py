"""How ``verify.attention`` meets a linear-attention layer: reference, state, gradient (C14)."""

from __future__ import annotations

from kernelcheck._src.attention.common.spec import FeatureSpec
from kernelcheck._src.attention.families.linear.vjp import linear_vjp_with_bounds

__all__ = ["LinearSpec"]


class LinearSpec(FeatureSpec):
    """Linear attention with a feature map, normalised or not (claims C10, C14, C19)."""

    state_form = "chunked"
    gradients = ("dQ", "dK", "dV")

    def describe(self) -> str:
        kind = "normalised" if self.normalize else "unnormalised"
        return f"linear attention ({kind}) with feature map {self.maps_text()}"

    def arguments(self, Q, K, V, extras) -> tuple[tuple, dict]:
        pq, pk = self.features(Q, K)
        return (pq, pk, V), {"normalize": self.normalize}

    def state_arguments(self, args) -> tuple:
        return args[:3]

    def vjp(self, args, kw, Q, K, V, G, model):
        """:func:`~kernelcheck.attention.linear_vjp`: dphi_q, dphi_k (as dQ, dK) and dV, bounded."""
        models = ((model, self.extra_ops(Q.shape[-1])), (None, 0))
        eps = self.options.stabilizer or 0.0
        ref, (b, b64) = linear_vjp_with_bounds(
            args[0], args[1], V, G, causal=self.causal, normalize=self.normalize, models=models,
            stabilizer=eps if self.normalize else 0.0,
        )  # fmt: skip
        return [
            ("dQ", 0, ref.dA, b.dA + b64.dA),
            ("dK", 1, ref.dB, b.dB + b64.dB),
            ("dV", 2, ref.dV, b.dV + b64.dV),
        ]
