"""How ``verify.attention`` meets a Kimi Delta Attention layer (claims C22-C24)."""

from __future__ import annotations

from kernelcheck._src.attention.common import transitions as tr
from kernelcheck._src.attention.common.transition_chain import Field
from kernelcheck._src.attention.common.transition_spec import (
    TransitionSpec,
    delta_bug_shapes,
    token_input,
)
from kernelcheck._src.attention.families.delta.reference import unit_keys
from kernelcheck._src.attention.families.gated.reference import GATES
from kernelcheck._src.attention.families.kda.forms import (
    CHANNEL_GATE,
    LIMITS,
    kda_step,
    kda_transitions,
)

__all__ = ["KdaSpec", "KEY_GATES"]


def _gate_sample(rng, shape):
    return rng.uniform(0.9, 1.0, size=shape)


#: Gates on the key channels in [0, 1] (0 resets a channel), supplied by ``key_decay=``.
#: Stressed as the scalar gates are (near 0 and near 1, on every channel).
KEY_GATES = token_input(
    "gates", "key_decay", CHANNEL_GATE, "D", _gate_sample, loggable=True, stress=GATES.stress
)


class KdaSpec(TransitionSpec):
    """Kimi Delta Attention, ``S_t = (I - beta k k^T) Diag(alpha) S_(t-1) + beta k v^T`` (C23)."""

    family = "Kimi Delta Attention"
    state_form = "kda_chunked"
    tokens = ("gates", "beta")
    channels = (True, False)
    raw_step = staticmethod(kda_step)
    limits = LIMITS
    fields = (
        Field("v", 1.0, ("beta", "v")),
        Field("read", -1.0, ("beta", "gates", "k")),
        Field("w", 1.0, ("gates",)),
    )
    canonical = staticmethod(kda_transitions)

    @classmethod
    def example_arguments(cls, rng, n: int, d: int, D: int, d_v: int, batch=()) -> tuple:
        """Unit keys, Gaussian queries and values, channel gates in (0.9, 1), steps in (0.1, 1)."""
        gates = _gate_sample(rng, (*batch, n, D))
        return unit_keys(rng, n, D, d_v, batch) + (gates, rng.uniform(0.1, 1.0, (*batch, n)))

    def bug_shapes(self, args, kw, mask, normalize: bool) -> dict:
        """Kimi Delta Attention's reported bugs (see :func:`delta_bug_shapes`)."""
        g, beta = tr.tokens_iv(self.inputs(args, kw), args[3:], LIMITS)
        return delta_bug_shapes(self, args, kw, beta, g)
