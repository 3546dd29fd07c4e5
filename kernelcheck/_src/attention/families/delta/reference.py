"""How ``verify.attention`` meets a DeltaNet layer: reference, state, bug shapes (C22, C24)."""

from __future__ import annotations

import numpy as np

from kernelcheck._src.attention.common import transitions as tr
from kernelcheck._src.attention.common.transition_chain import Field
from kernelcheck._src.attention.common.transition_spec import (
    TransitionSpec,
    delta_bug_shapes,
    token_input,
)
from kernelcheck._src.attention.families.delta.forms import BETA, LIMITS, delta_transitions

__all__ = ["DeltaSpec", "BETA_INPUT", "unit_keys"]


def _beta_sample(rng, shape):
    return rng.uniform(0.1, 1.0, size=shape)


def _beta_stress(rng, shape):
    """Steps near 0 (writes that vanish: the state barely moves) and near 2 (the
    eigenvalue ``1 - beta |k|^2`` near -1 of the layers that allow negative
    eigenvalues by doubling a sigmoid: a state that flips sign at every token)."""
    return {
        "beta near 0": rng.uniform(1e-6, 1e-3, size=shape),
        "beta near 2": 2.0 - rng.uniform(0.0, 1e-3, size=shape),
    }


#: The delta rule's step ``beta_t >= 0``, one per token and head, supplied by ``beta=``.
BETA_INPUT = token_input("beta", "beta", BETA, "", _beta_sample, stress=_beta_stress)


def unit_keys(rng, n: int, D: int, d_v: int, batch=()) -> tuple:
    """Gaussian queries and values and keys of norm 1 (the shipped layers normalise theirs)."""
    q, k = rng.standard_normal((2, *batch, n, D))
    k /= np.linalg.norm(k, axis=-1, keepdims=True)
    return q, k, rng.standard_normal((*batch, n, d_v))


class DeltaSpec(TransitionSpec):
    """The delta rule, ``S_t = (I - beta_t k_t k_t^T) S_(t-1) + beta_t k_t v_t^T`` (C22)."""

    family = "the delta rule (DeltaNet)"
    state_form = "delta_chunked"
    tokens = ("beta",)
    channels = (False,)
    limits = LIMITS
    fields = (Field("v", 1.0, ("beta", "v")), Field("read", -1.0, ("beta", "k")))
    canonical = staticmethod(delta_transitions)

    @classmethod
    def example_arguments(cls, rng, n: int, d: int, D: int, d_v: int, batch=()) -> tuple:
        """Unit keys, Gaussian queries and values, steps in (0.1, 1)."""
        return unit_keys(rng, n, D, d_v, batch) + (_beta_sample(rng, (*batch, n)),)

    def bug_shapes(self, args, kw, mask, normalize: bool) -> dict:
        """The delta rule's reported bugs (see :func:`delta_bug_shapes`)."""
        (beta,) = tr.tokens_iv(self.inputs(args, kw), args[3:], LIMITS)
        return delta_bug_shapes(self, args, kw, beta, None)
