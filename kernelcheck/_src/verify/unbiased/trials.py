"""Trial functions of a user's sampler, for :func:`kernelcheck.verify.unbiased` (C13, C17, C18).

One trial draws a feature map ``phi = sample(rng)`` and returns the estimates
``phi(x_i) . phi(y_j)`` of every pair with a rounding scale for each (the
engine :func:`kernelcheck._src.mc.engine.run_trials` keeps its maximum).  The
rounding scale is in the format the map's features come in (a float32
sampler's features carry float32 roundings, whatever precision kernelcheck
then forms their products in).  The trial functions are module-level
classes, so process executors can pickle them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from kernelcheck._src.core.calls import call_user
from kernelcheck._src.core.deadline import current_deadline, within_deadline
from kernelcheck._src.core.rounding import (
    PRECISIONS,
    Precision,
    RoundingModel,
    default_feature_ops,
    gamma,
    given_precision,
    inner_product_factor,
)
from kernelcheck._src.core.validate import describe, to_numpy
from kernelcheck.errors import InvalidArgument

__all__ = ["SamplerTrials", "BatchTrials", "trial_function", "sampler_name"]


_FLOAT64 = PRECISIONS["float64"]


def _check_features(
    F: Any, X: np.ndarray, name: str, D: int | None
) -> tuple[np.ndarray, Precision]:
    """The features in float64 and the format they came in (float64 for exact integers)."""
    fmt = given_precision(F) or _FLOAT64
    try:  # a tensor of any framework, dtype (bfloat16 included) or device
        arr = to_numpy(F, f"phi({name})")
    except InvalidArgument:
        arr = np.asarray(None)  # refused below, naming `sample`
    if arr.dtype.kind not in "biuf":
        raise InvalidArgument(
            f"`sample` returned a feature map whose output on `{name}` is not a real array "
            f"(got {describe(arr)})"
        )
    if arr.ndim != 2 or arr.shape[0] != X.shape[0] or (D is not None and arr.shape[1] != D):
        want = f"({X.shape[0]}, D)" if D is None else f"({X.shape[0]}, {D})"
        raise InvalidArgument(
            f"`sample` returned a feature map whose output on `{name}` (shape {X.shape}) "
            f"must have shape {want}, got {describe(arr)}"
        )
    arr = arr.astype(np.float64, copy=False)
    if not np.isfinite(arr).all():
        bad = tuple(int(i) for i in np.argwhere(~np.isfinite(arr))[0])
        raise InvalidArgument(
            f"`sample` returned a feature map whose output on `{name}` holds NaN or Inf "
            f"(first at index {bad}: {arr[bad]!r})"
        )
    return arr, fmt


def _rounding_scale(D: int, d: int, fmt: Precision = _FLOAT64) -> float:
    """The relative rounding error of one estimate ``phi(x) . phi(y)``, times ``|phi(x)| |phi(y)|``.

    Each feature entry carries ``ops = 2 d + 8`` roundings, the user-map
    model of :func:`~kernelcheck._src.core.rounding.default_feature_ops` (the
    built-in random features fit it), in the format ``fmt`` the features
    came in; kernelcheck forms the length-D product in float64.  So:

    * float64 features: ``gamma_(D + 2 ops)(1 + gamma_D)`` (Higham, Lemma
      3.3: ``D + 2 ops`` roundings per term; ``(1 + gamma_D)`` for the
      norms' own rounding);
    * features in a coarser format (float32, float16, bfloat16):
      ``((1 + gamma_D)(1 + gamma_(2 ops)(fmt)) - 1)(1 + gamma_D)``, the
      ``2 ops`` roundings of the two entries in ``fmt``'s unit roundoff and
      the ``D`` of the float64 product in float64's
      (:class:`~kernelcheck._src.core.rounding.RoundingModel`).

    The estimate's error is at most this times ``sum_k |phi_k(x)| |phi_k(y)|
    <= |phi(x)|_2 |phi(y)|_2`` (Cauchy-Schwarz).
    """
    ops = 2 * default_feature_ops(d)
    if fmt.u <= _FLOAT64.u:
        return inner_product_factor(D, ops)
    return RoundingModel(_FLOAT64, fmt, storage_ops=ops).gamma(D) * (1.0 + gamma(D))


class SamplerTrials:
    """Trials of a user sampler: one ``sample(rng)`` call per trial, GEMMs batched.

    The deadline of the verifier (``timeout=``) is taken when the trials are
    built and holds in whatever thread or process of this machine an
    executor runs a shard in (an executor's worker does not inherit it).
    """

    def __init__(self, sample: Callable, X: np.ndarray, Y: np.ndarray):
        self.sample, self.X, self.Y = sample, X, Y
        self.deadline = current_deadline()

    def __call__(self, rng, n):
        with within_deadline(self.deadline):
            return self._trials(rng, n)

    def _trials(self, rng, n):
        FXs, FYs, scales = [], [], []
        d = self.X.shape[1]
        for _ in range(n):
            phi = call_user(self.sample, "`sample`: the call sample(rng)", rng)
            if not callable(phi):
                raise InvalidArgument(
                    f"`sample(rng)` must return a feature map (a callable X -> (n, D)), "
                    f"got {describe(phi)}"
                )
            FX, fx = _check_features(
                call_user(phi, "`sample`: the call phi(X)", self.X), self.X, "X", None
            )
            FY, fy = _check_features(
                call_user(phi, "`sample`: the call phi(Y)", self.Y), self.Y, "Y", FX.shape[1]
            )
            FXs.append(FX)
            FYs.append(FY)
            scales.append(_rounding_scale(FX.shape[1], d, max(fx, fy, key=lambda p: p.u)))
        dims = {F.shape[1] for F in FXs}
        if len(dims) == 1:
            FX, FY = np.stack(FXs), np.stack(FYs)
            est = FX @ np.swapaxes(FY, -1, -2)
            nx = np.sqrt(np.einsum("tij,tij->ti", FX, FX))
            ny = np.sqrt(np.einsum("tij,tij->ti", FY, FY))
            bound = np.asarray(scales)[:, None, None] * nx[:, :, None] * ny[:, None, :]
        else:
            est = np.stack([a @ b.T for a, b in zip(FXs, FYs, strict=True)])
            bound = np.stack(
                [
                    c * np.outer(np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1))
                    for a, b, c in zip(FXs, FYs, scales, strict=True)
                ]
            )
        return est, bound


class BatchTrials:
    """Trials of a vectorised sampler (``batch_estimates``): no Python loop per trial."""

    def __init__(self, sampler, X: np.ndarray, Y: np.ndarray):
        self.sampler, self.X, self.Y = sampler, X, Y

    def __call__(self, rng, n):
        est, bound = self.sampler.batch_estimates(rng, n, self.X, self.Y)
        D = self.sampler.num_features * getattr(self.sampler._proto, "_per_row", 1)
        if not np.isfinite(est).all():
            raise InvalidArgument("`sample` produced a non-finite kernel estimate (overflow)")
        return est, _rounding_scale(D, self.X.shape[1]) * bound


def trial_function(sample, X: np.ndarray, Y: np.ndarray):
    """The trial function of ``sample``: batched for a ``RandomFeatureSampler``."""
    if callable(getattr(sample, "batch_estimates", None)) and hasattr(sample, "_proto"):
        return BatchTrials(sample, X, Y)
    return SamplerTrials(sample, X, Y)


def sampler_name(obj) -> str:
    """A stable name for a sampler (no memory addresses)."""
    if (
        isinstance(obj, type)
        or callable(getattr(obj, "__code__", None))
        or hasattr(obj, "__qualname__")
    ):
        return getattr(obj, "__qualname__", type(obj).__name__)
    text = repr(obj)
    return type(obj).__name__ if " at 0x" in text else text
