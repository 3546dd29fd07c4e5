"""How ``verify.attention`` meets a kernelized layer: its reference and range (claim C10)."""

from __future__ import annotations

import mpmath
import numpy as np

from kernelcheck._src.attention.common.exact import DIGITS, over_batch, weighted_rows
from kernelcheck._src.attention.common.spec import FamilySpec

__all__ = ["KernelizedSpec"]


class KernelizedSpec(FamilySpec):
    """Exact attention with the weights ``kappa(q_i, k_j)`` of a kernel object (claim C10)."""

    @classmethod
    def example_arguments(cls, rng, n: int, d: int, D: int, d_v: int, batch=()) -> tuple:
        """Gaussian queries, keys and values, with the exponential kernel ``exp(q . k / sqrt d)``.

        Its Gram block is a dot product and one elementwise map, as the cost
        model counts (a distance kernel's norms are the kernel's own work).
        """
        from kernelcheck._src.kernels.leaves import Exponential

        Q, K = rng.standard_normal((2, *batch, n, d))
        return (Q, K, rng.standard_normal((*batch, n, d_v)), Exponential(scale=1 / np.sqrt(d)))

    @classmethod
    def exact_output(cls, args, kw, causal: bool) -> np.ndarray:
        """Kernelized attention with the kernel's Gram block in mpmath (its ``gram_mp``)."""
        kernel = args[3]

        def one(Q, K, V):
            with mpmath.workdps(DIGITS):
                G = kernel.gram_mp(Q, K, dps=DIGITS)

            def weight(i, j):
                return G[i, j]

            return weighted_rows(weight, V, Q.shape[0], causal=causal, normalize=True)

        return over_batch(one, *(np.asarray(a, dtype=np.float64) for a in args[:3]))

    def describe(self) -> str:
        return f"kernelized attention with {self.options.kernel!r}"

    def arguments(self, Q, K, V, extras) -> tuple[tuple, dict]:
        return (Q, K, V, self.options.kernel), {}

    def _gram(self, Q, K) -> np.ndarray:
        out = np.empty(Q.shape[:-1] + (K.shape[-2],))
        for idx in np.ndindex(*Q.shape[:-2]):
            out[idx] = self.options.kernel(Q[idx], K[idx])
        return out

    def largest_intermediates(self, args, kw) -> tuple[float, float]:
        """The Gram entries and values stored; the Gram entries times ``n max |v|`` accumulated."""
        with np.errstate(over="ignore"):
            Q, K, V = args[0], args[1], args[2]
            n, vmax = K.shape[-2], float(np.abs(V).max())
            G = np.abs(self.options.kernel(Q.reshape(-1, Q.shape[-1]), K.reshape(-1, K.shape[-1])))
            return max(float(G.max()), vmax), float(G.max()) * n * max(vmax, 1.0)

    def scores(self, args, kw, *, swap: bool = False, scale=None):
        Q, K = args[0], args[1]
        return self._gram(K, Q) if swap else self._gram(Q, K)
