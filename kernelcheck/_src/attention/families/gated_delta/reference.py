"""How ``verify.attention`` meets a Gated DeltaNet layer (claims C22-C24)."""

from __future__ import annotations

from kernelcheck._src.attention.common import transitions as tr
from kernelcheck._src.attention.common.transition_chain import Field
from kernelcheck._src.attention.common.transition_spec import TransitionSpec, delta_bug_shapes
from kernelcheck._src.attention.families.delta.reference import BETA_INPUT, unit_keys
from kernelcheck._src.attention.families.gated.reference import GATES
from kernelcheck._src.attention.families.gated_delta.forms import (
    LIMITS,
    gated_delta_step,
    gated_delta_transitions,
)

__all__ = ["GatedDeltaSpec", "GATED_DELTA_INPUTS"]

#: The per-token inputs in flash-linear-attention's order ``(q, k, v, g, beta)``.
GATED_DELTA_INPUTS = (GATES, BETA_INPUT)


class GatedDeltaSpec(TransitionSpec):
    """Gated DeltaNet, ``S_t = alpha_t (I - beta_t k_t k_t^T) S_(t-1) + beta_t k_t v_t^T``."""

    family = "Gated DeltaNet (the gated delta rule)"
    state_form = "gated_delta_chunked"
    tokens = ("gates", "beta")
    channels = (False, False)
    raw_step = staticmethod(gated_delta_step)
    limits = LIMITS
    fields = (
        Field("v", 1.0, ("beta", "v")),
        Field("read", -1.0, ("gates", "beta", "k")),
        Field("w", 1.0, ("gates",)),
    )
    canonical = staticmethod(gated_delta_transitions)

    @classmethod
    def example_arguments(cls, rng, n: int, d: int, D: int, d_v: int, batch=()) -> tuple:
        """Unit keys, Gaussian queries and values, gates in (0.9, 1), steps in (0.1, 1)."""
        gates = rng.uniform(0.9, 1.0, (*batch, n))
        return unit_keys(rng, n, D, d_v, batch) + (gates, rng.uniform(0.1, 1.0, (*batch, n)))

    def bug_shapes(self, args, kw, mask, normalize: bool) -> dict:
        """Gated DeltaNet's reported bugs (see :func:`delta_bug_shapes`)."""
        g, beta = tr.tokens_iv(self.inputs(args, kw), args[3:], LIMITS)
        return delta_bug_shapes(self, args, kw, beta, g)
