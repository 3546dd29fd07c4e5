"""How ``verify.attention`` meets a gated layer: reference, state, decays and bug shapes (C20)."""

from __future__ import annotations

import mpmath
import numpy as np

from kernelcheck._src.attention.common.inputs import gates_iv
from kernelcheck._src.attention.common.spec import FeatureSpec, TokenInput
from kernelcheck._src.attention.families.gated.vjp import gated_vjp_with_bounds
from kernelcheck.errors import InvalidArgument

__all__ = ["GatedSpec", "GATES"]


def _gates(value, shape, name):
    if isinstance(value, (bool, np.bool_)) or np.asarray(value).dtype.kind == "b":
        raise InvalidArgument(
            f"`{name}` must be a number in (0, 1] or an array of them, got {value!r}"
        )
    return gates_iv(value, shape, np.dtype(np.float64), name).gates


def _sample(rng, shape):
    return rng.uniform(0.9, 1.0, size=shape)


def _stress(rng, shape):
    """Gates near 0 (the state forgotten at almost every token: decays below the
    normal range within a few tokens) and gates near 1 (1 - 1e-6: decays that
    round to 1 in 16 bits, log gates of about -1e-6 summed over the sequence)."""
    return {
        "gates near 0": rng.uniform(1e-6, 1e-3, size=shape),
        "gates near 1": 1.0 - rng.uniform(0.0, 1e-6, size=shape),
    }


#: The gates ``g_t`` in (0, 1], one per token and head, supplied by ``decay=``.
GATES = TokenInput(
    "gates", "decay", _gates, sample=_sample, loggable=True, positive=True, stress=_stress
)


class GatedSpec(FeatureSpec):
    """Decayed or gated linear attention, ``S_t = g_t S_(t-1) + phi(k_t) v_t^T`` (claim C20)."""

    state_form = "gated_chunked"

    gradients = ("dQ", "dK", "dV")

    @classmethod
    def example_arguments(cls, rng, n: int, d: int, D: int, d_v: int, batch=()) -> tuple:
        """Positive features, Gaussian values and gates in (0.9, 1) per token."""
        return super().example_arguments(rng, n, d, D, d_v, batch) + (_sample(rng, (*batch, n)),)

    @classmethod
    def exact_decays(cls, args):
        """``d_ij = prod_{l=j+1..i} g_l`` in mpmath, from one batch entry's gates."""

        def decays(gates):
            g = [mpmath.mpf(float(x)) for x in gates]

            def decay(i, j):
                return mpmath.fprod(g[j + 1 : i + 1]) if i > j else mpmath.mpf(1)

            return decay

        return decays

    def describe(self) -> str:
        kind = "normalised" if self.normalize else "unnormalised"
        return f"gated linear attention ({kind}) with feature map {self.maps_text()}"

    def arguments(self, Q, K, V, extras) -> tuple[tuple, dict]:
        pq, pk = self.features(Q, K)
        return (pq, pk, V, extras["gates"]), {"normalize": self.normalize}

    def state_arguments(self, args) -> tuple:
        return args[:4]

    def log_decays(self, extras):
        return np.log(extras["gates"])

    def decays(self, extras, n: int) -> dict:
        """The correct log decays ``L_i - L_j`` and three off-by-one variants, (..., n, n)."""
        gates = extras["gates"]
        L = np.cumsum(np.log(gates), axis=-1)
        Lp = np.concatenate([np.zeros(L.shape[:-1] + (1,)), L[..., :-1]], axis=-1)  # L_{j-1}
        logg = np.log(gates)
        i = L[..., :, None]
        later = np.concatenate([logg[..., 1:], np.zeros(L.shape[:-1] + (1,))], -1)[..., None, :]
        return {
            "correct": i - L[..., None, :],
            "one decay factor too many: prod_{l=j..i} g_l (the gate applied after the update, "
            "or the parallel mask's exponent off by one)": i - Lp[..., None, :],
            "the previous token's gate: prod_{l=j..i-1} g_l (g_(t-1) used at step t)": i
            - logg[..., :, None]
            - Lp[..., None, :],
            "one decay factor too few: prod_{l=j+2..i} g_l": np.minimum(
                i - L[..., None, :] - later, 0.0
            ),
        }

    def vjp(self, args, kw, Q, K, V, G, model):
        """:func:`~kernelcheck.attention.gated_vjp`: dphi_q, dphi_k (as dQ, dK), dV and dg (C20).

        ``dg`` (index 3: the family's first per-token input) is the derivative
        by ``log g``, the gradient of a layer handed ``log g``.
        """
        models = ((model, self.extra_ops(Q.shape[-1])), (None, 0))
        ref, (b, b64) = gated_vjp_with_bounds(
            args[0], args[1], V, args[3], G, normalize=self.normalize, models=models
        )
        return self.feature_vjp(ref, b, b64) + [
            ("dg", 3, ref.dlog_gates, b.dlog_gates + b64.dlog_gates)
        ]
