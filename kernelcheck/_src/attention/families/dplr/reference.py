"""How ``verify.attention`` meets a diagonal-plus-rank-one (RWKV-7) layer (claims C23, C24)."""

from __future__ import annotations

import numpy as np

from kernelcheck._src.attention.common import transitions as tr
from kernelcheck._src.attention.common.transition_chain import Field
from kernelcheck._src.attention.common.transition_spec import TransitionSpec, token_input
from kernelcheck._src.attention.families.dplr.forms import LIMITS, READ, WRITE, dplr_transitions

__all__ = ["DplrSpec", "DPLR_A", "DPLR_B", "rwkv7_factors"]


def rwkv7_factors(rng, shape) -> tuple[np.ndarray, np.ndarray]:
    """RWKV-7's factors ``a = -kappa``, ``b = kappa o c`` (unit ``kappa``, ``c`` in (0, 1))."""
    kappa = rng.standard_normal(shape)
    kappa /= np.linalg.norm(kappa, axis=-1, keepdims=True)
    return -kappa, kappa * rng.uniform(0.0, 1.0, shape)


def _a_sample(rng, shape):
    return rwkv7_factors(rng, shape)[0]


def _b_sample(rng, shape):
    return rwkv7_factors(rng, shape)[1]


#: The transition's read factor ``a_t`` (RWKV-7's ``-kappa``), supplied by ``dplr_a=``.
DPLR_A = token_input("a", "dplr_a", READ, "D", _a_sample)
#: The transition's write factor ``b_t`` (RWKV-7's ``kappa o a``), supplied by ``dplr_b=``.
DPLR_B = token_input("b", "dplr_b", WRITE, "D", _b_sample)


def _transposed(S, q, k, v, a, b, w):
    return tr.dplr_step(S, q, k, v, b, a, w)


def _decay_after(S, q, k, v, a, b, w):
    x = (a[..., None, :] @ S)[..., 0, :]
    S = (S + b[..., :, None] * x[..., None, :]) * w[..., :, None] + k[..., :, None] * v[
        ..., None, :
    ]
    return S, (q[..., None, :] @ S)[..., 0, :]


def _read_decayed(S, q, k, v, a, b, w):
    Sw = S * w[..., :, None]
    x = (a[..., None, :] @ Sw)[..., 0, :]
    S = Sw + b[..., :, None] * x[..., None, :] + k[..., :, None] * v[..., None, :]
    return S, (q[..., None, :] @ S)[..., 0, :]


class DplrSpec(TransitionSpec):
    """The DPLR transition, ``S_t = (Diag(w_t) + b_t a_t^T) S_(t-1) + k_t v_t^T`` (C23)."""

    family = "the diagonal-plus-rank-one transition (RWKV-7)"
    state_form = "dplr_chunked"
    tokens = ("a", "b", "gates")
    channels = (True, True, True)
    raw_step = staticmethod(tr.dplr_step)
    limits = LIMITS
    fields = (
        Field("v", 1.0, ("v",)),
        Field("read", 1.0, ("a",)),
        Field("write", 1.0, ("b",)),
        Field("w", 1.0, ("gates",)),
    )
    canonical = staticmethod(dplr_transitions)

    @classmethod
    def example_arguments(cls, rng, n: int, d: int, D: int, d_v: int, batch=()) -> tuple:
        """Gaussian queries, keys and values, RWKV-7's factors, channel gates in (0.9, 1)."""
        q, k = rng.standard_normal((2, *batch, n, D))
        a, b = rwkv7_factors(rng, (*batch, n, D))
        w = rng.uniform(0.9, 1.0, (*batch, n, D))
        return (q, k, rng.standard_normal((*batch, n, d_v)), a, b, w)

    def token_value(self, name: str, extras, pq) -> np.ndarray:
        """The gates default to 1 (``key_decay`` is optional: no decay)."""
        if name == "gates" and name not in extras:
            return np.ones(pq.shape)
        return extras[name]

    def bug_shapes(self, args, kw, mask, normalize: bool) -> dict:
        """Reported shapes of a wrong transition, computed from the reference's inputs.

        * the transition transposed, ``Diag(w) + a b^T`` in the key-major state
          (read and write exchanged): RWKV-7 writes its state value-major,
          ``S_t = S_(t-1) (Diag(w) + a b^T)``, flash-linear-attention's kernels
          key-major (its ``dplr`` naive reference states both);
        * the decay applied after the rank-one update, ``Diag(w) (S + b a^T S)``;
        * the rank-one part reading the decayed state, ``b a^T Diag(w) S``.
        """
        x = self.inputs(args, kw)
        tokens = tr.tokens_iv(x, args[3:], LIMITS)
        shapes = {
            "the transition transposed (read a and write b exchanged)": _transposed,
            "the decay applied after the rank-one update": _decay_after,
            "the rank-one part reading the decayed state": _read_decayed,
        }
        return {
            label: tr.run_steps(step, x.q, x.k, x.v, tokens, x.S0)[0]
            for label, step in shapes.items()
        }
