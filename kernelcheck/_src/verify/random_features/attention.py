"""Does a user's random-feature attention layer approximate exact attention (claim C16)?

:func:`random_feature_attention` calls the user's layer ``fn(Q, K, V, m, rng)``
over many redraws of its random features at several m, compares the mean
output with exact attention under the target kernel, and decides whether the
bias is the one a correct random-feature layer has -- ``beta / m +
gamma / m^2``, vanishing as m grows (C16) -- or a bias that stays (an ``eps``
added to the features, a wrong scale, a feature map of another kernel).  The
runs are those of :func:`kernelcheck.verify.ratio_bias` (a pilot fixes the
bias direction, then one seeded run per m); the statistics are in
:mod:`kernelcheck._src.verify.random_features.attention_stats` and
``docs/statistics.md``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from kernelcheck._src.attention.families.kernelized.forms import kernelized
from kernelcheck._src.core.calls import call_user
from kernelcheck._src.core.deadline import current_deadline, honours_timeout, within_deadline
from kernelcheck._src.core.outcome import Outcome, outcome_of
from kernelcheck._src.core.results import Result
from kernelcheck._src.core.rounding import gamma
from kernelcheck._src.core.seeds import child_seed
from kernelcheck._src.core.validate import (
    as_bool,
    as_int,
    as_points,
    as_probability,
    check_callable,
    describe,
    to_numpy,
)
from kernelcheck._src.kernels.base import Kernel
from kernelcheck._src.kernels.leaves import Exponential
from kernelcheck._src.mc.engine import DEFAULT_SHARD_SIZE, root_seed_sequence
from kernelcheck._src.verify.random_features.attention_stats import asymptotic_bias
from kernelcheck._src.verify.random_features.ratio_bias import (
    bias_norms,
    measure_bias_series,
    values_and_feature_counts,
)
from kernelcheck._src.verify.unbiased.results import format_trials
from kernelcheck._src.verify.unbiased.stats import median_finite, trials_to_detect
from kernelcheck.errors import InvalidArgument, NumericalFailure

__all__ = [
    "random_feature_attention",
    "RandomFeatureAttentionReport",
]

_PROBE_PATH = 7  # child of the root seed used by the one probe call


class _LayerTrials:
    """Trials of the user's layer at m features: flattened outputs and their projection on u.

    The verifier's deadline (``timeout=``) is taken when the trials are built
    and holds in whatever thread an executor runs a shard in.
    """

    def __init__(self, fn, Q, K, V, m, direction, dtype_out: list):
        self.fn, self.Q, self.K, self.V, self.m = fn, Q, K, V, m
        self.direction, self.dtype_out = direction, dtype_out
        self.deadline = current_deadline()

    def __call__(self, rng, n):
        with within_deadline(self.deadline):
            return self._trials(rng, n)

    def _trials(self, rng, n):
        out = np.empty((n, self.direction.size + 1))
        for t in range(n):
            a = _call_layer(self.fn, self.Q, self.K, self.V, self.m, rng, self.dtype_out)
            out[t, :-1] = a
            with np.errstate(over="ignore", invalid="ignore"):
                out[t, -1] = a @ self.direction
            if not np.isfinite(out[t, -1]):
                raise NumericalFailure(
                    f"`fn` at m = {self.m} returned outputs (largest {np.abs(a).max():.3g}) whose "
                    "projection on the bias direction exceeds the float64 range; scale `V` down"
                )
        return out


def _call_layer(fn, Q, K, V, m, rng, dtype_out: list) -> np.ndarray:
    """One call of the user's layer, checked: shape (nq, dv), real, finite."""
    label = f"`fn` at m = {m}"
    raw = to_numpy(call_user(fn, label, Q, K, V, m, rng), label)
    shape = (Q.shape[0], V.shape[1])
    if raw.shape != shape or raw.dtype.kind not in "fiu":
        raise InvalidArgument(
            f"{label} must return real values of shape {shape}, got {describe(raw)}"
        )
    a = raw.astype(np.float64)
    if not np.isfinite(a).all():
        raise InvalidArgument(f"{label} returned NaN or Inf (a verdict needs finite outputs)")
    if not dtype_out:
        dtype_out.append(raw.dtype if raw.dtype.kind == "f" else np.dtype(np.float64))
    return a.ravel()


@dataclass(frozen=True, repr=False)
class RandomFeatureAttentionReport(Result):
    """Report of :func:`random_feature_attention`.

    Attributes
    ----------
    passed : bool
        No test rejects at family-wise level ``alpha``: no output entry has an
        asymptotic bias (its ``c_p`` of ``b_p(m) = c_p + beta_p/m + gamma_p/m^2``)
        and the projected bias follows the C16 law ``beta/m + gamma/m^2``.
    num_features : tuple of int
        The m values.
    exact : numpy.ndarray, shape (nq, dv)
        Exact attention with ``kernel``.
    bias_norm, bias_norm_se : tuple of float
        Per m, the noise-corrected Frobenius norm of the mean output's bias and its SE.
    asymptotic_bias, asymptotic_bias_se, z, p_value : numpy.ndarray, shape (nq, dv)
        Per entry, the fitted bias at m -> infinity, its standard error, the z
        statistic (after the rounding tolerance) and its two-sided p-value.
    rejected : numpy.ndarray of bool, shape (nq, dv)
        The entries whose test Holm's procedure rejects.
    beta, beta_se, gamma, gamma_se, gof_p, slope : float
        The fit of the bias along the pilot's direction, ``beta / m + gamma / m^2``
        (as :func:`kernelcheck.verify.ratio_bias`), its goodness-of-fit p-value
        (NaN when not tested: too few m) and the log-log slope at the largest m.
    law_rejected : bool
        Holm's procedure rejects the C16 law (the goodness of fit).
    detectable_bias : float
        Median over entries of the asymptotic bias found with probability
        ``power`` (an entry with this bias is rejected at Holm's first step).
    detectable_relative : float
        ``detectable_bias`` over the RMS of the exact output.
    trials_to_confirm : float
        When failing: redraws per m after which a confirming run with another
        seed finds the largest measured excess with probability ``power``.
    critical : float
        Holm's first-step critical value ``z_(1 - alpha/2M)`` over the M tests.
    relative_variance : float
        For an :class:`~kernelcheck.kernels.Exponential` target, the largest
        relative variance ``exp(scale |q + k|^2) - 1`` of one positive feature's
        kernel estimate over the (q, k) pairs (NaN for other kernels): the
        1/m expansion holds once m is well above it.
    inconclusive : bool
        A test rejected, but the smallest m is below ``relative_variance``:
        the rejection may come from the expansion's rest, not from the layer.
    trials, alpha, power, kernel, causal, dtype : settings
        ``dtype`` is the layer's output dtype (it sets the rounding tolerance).
    """

    passed: bool
    num_features: tuple
    exact: np.ndarray
    bias_norm: tuple
    bias_norm_se: tuple
    asymptotic_bias: np.ndarray
    asymptotic_bias_se: np.ndarray
    z: np.ndarray
    p_value: np.ndarray
    rejected: np.ndarray
    beta: float
    beta_se: float
    gamma: float
    gamma_se: float
    gof_p: float
    slope: float
    law_rejected: bool
    detectable_bias: float
    detectable_relative: float
    trials_to_confirm: float
    critical: float
    relative_variance: float
    inconclusive: bool
    trials: int
    alpha: float
    power: float
    kernel: str
    causal: bool
    dtype: str

    @property
    def outcome(self) -> Outcome:
        """Verified when no test rejects, inconclusive when one does before the 1/m regime."""
        return outcome_of(None if self.inconclusive else self.passed)

    @property
    def verdict(self) -> str:
        """``"pass"``, ``"fail"`` or ``"inconclusive"``."""
        return "inconclusive" if self.inconclusive else "pass" if self.passed else "fail"

    def trials_to_detect(self, bias: float) -> float:
        """Redraws per m after which an asymptotic bias ``bias`` is found with ``power``.

        ``((z_c + z_power) sigma / |bias|)^2`` with ``sigma`` the median entry's
        standard error times ``sqrt(trials)`` and ``z_c`` Holm's first-step critical value.

        Parameters
        ----------
        bias : float
            The asymptotic bias to detect, ``> 0``.
        """
        from scipy.special import ndtri

        sigma = median_finite(self.asymptotic_bias_se) * math.sqrt(self.trials)
        return float(trials_to_detect(sigma, bias, self.critical, float(ndtri(self.power))))

    def _worst(self) -> tuple[int, ...]:
        k = int(np.argmax(np.where(np.isnan(self.z), -1.0, self.z)))  # an infinite z is the worst
        return tuple(int(i) for i in np.unravel_index(k, self.z.shape))

    def _text(self) -> str:
        rms = float(np.sqrt(np.mean(self.exact**2)))
        worst = self._worst()
        return (
            f"random-feature attention: bias at m -> inf "
            f"{self.asymptotic_bias[worst]:.3g} +- {self.asymptotic_bias_se[worst]:.2g} at output "
            f"{worst} (z = {self.z[worst]:.3g}; exact RMS {rms:.3g}); "
            f"C16 law beta/m + gamma/m^2: beta = {self.beta:.3g} +- {self.beta_se:.2g}, "
            f"fit p = {self.gof_p:.3g}; {self.trials} redraws per m, m = {self.num_features}; "
            f"detects an asymptotic bias of {self.detectable_bias:.2g} "
            f"({100 * self.detectable_relative:.2g}% of the RMS output, median entry) "
            f"with probability {self.power:g}"
        )

    def advice(self) -> str:
        """What to do when the report does not pass, in one sentence ("" when it passes)."""
        if self.passed:
            return ""
        if self.inconclusive:
            return (
                f"the smallest m ({min(self.num_features)}) is below the relative variance "
                f"{self.relative_variance:.3g} of one feature, where the 1/m expansion does not "
                "hold yet: use m well above it"
            )
        if _exact_miss(self.rejected, self.asymptotic_bias_se):
            return (
                "the output does not vary over redraws at an entry that differs from the exact "
                "output beyond rounding: an exact difference, not a statistical one"
            )
        return (
            f"a correct layer fails at rate {self.alpha:g}: confirm with more trials "
            f"or another seed (about {format_trials(self.trials_to_confirm)} redraws per m)"
        )

    def first_failure(self) -> str:
        """The most significant rejected entry, or the rejected C16 law ("" when none).

        Returns
        -------
        str
        """
        if self.inconclusive or self.passed:
            return ""
        if self.rejected.any():
            i, e = self._worst()
            return (
                f"output ({i}, {e}) is biased at m -> inf: {self.asymptotic_bias[i, e]:.3g} +- "
                f"{self.asymptotic_bias_se[i, e]:.2g} (z = {self.z[i, e]:.3g}; exact "
                f"{self.exact[i, e]:.6g})"
            )
        return f"the bias does not follow beta/m + gamma/m^2 (fit p = {self.gof_p:.3g})"

    def details(self) -> str:
        """The rejected entries (at most 20), and the C16 law when it is rejected."""
        lines = []
        idx = np.argwhere(self.rejected)
        for i, e in idx[:20]:
            lines.append(
                f"  output ({i}, {e}): exact {self.exact[i, e]:.6g}, bias at m -> inf "
                f"{self.asymptotic_bias[i, e]:.3g} +- {self.asymptotic_bias_se[i, e]:.2g}"
            )
        if len(idx) > 20:
            lines.append(f"  ... and {len(idx) - 20} more entries")
        if self.law_rejected:
            lines.append(
                f"  the bias does not follow beta/m + gamma/m^2 (fit p = {self.gof_p:.3g})"
            )
        return "\n".join(lines)


class _Args(NamedTuple):
    Q: np.ndarray
    K: np.ndarray
    V: np.ndarray
    kernel: Any
    ms: tuple
    trials: int
    alpha: float
    power: float
    causal: bool
    root: np.random.SeedSequence


def _iv(fn, Q, K, V, kernel, num_features, trials, seed, alpha, power, causal) -> _Args:
    check_callable(fn, "fn")
    kernel = Exponential() if kernel is None else kernel
    if not isinstance(kernel, Kernel):
        raise InvalidArgument(f"`kernel` must be a kernelcheck Kernel, got {describe(kernel)}")
    Q = as_points(Q, "Q").astype(np.float64)
    K = as_points(K, "K", dim=Q.shape[1]).astype(np.float64)
    V, ms = values_and_feature_counts(V, K, num_features)
    causal = as_bool(causal, "causal")
    if causal and Q.shape[0] != K.shape[0]:
        raise InvalidArgument(
            f"causal attention needs as many queries as keys, got {Q.shape[0]} and {K.shape[0]}"
        )
    trials = as_int(trials, "trials", minimum=2)
    alpha = as_probability(alpha, "alpha")
    power = as_probability(power, "power")
    return _Args(Q, K, V, kernel, ms, trials, alpha, power, causal, root_seed_sequence(seed))


@honours_timeout
def random_feature_attention(
    fn: Callable,
    Q,
    K,
    V,
    *,
    kernel=None,
    num_features=(16, 32, 64, 128),
    trials: int = 2000,
    seed: Any,
    alpha: float = 0.01,
    power: float = 0.8,
    causal: bool = False,
    executor=None,
    shard_size: int = DEFAULT_SHARD_SIZE,
    progress: bool | None = None,
    shards: int | None = None,
    timeout: float | None = None,
) -> RandomFeatureAttentionReport:
    """Check a random-feature attention layer against exact attention over redraws (C16).

    ``fn(Q, K, V, m, rng)`` is the user's layer: it draws its random features
    (m of them) from the NumPy Generator ``rng`` only, and returns the output
    of shape (nq, dv) (an array or a tensor).  For each m of ``num_features``
    it is called ``trials`` times; a pilot of ``2 trials`` redraws at a
    quarter of the smallest m fixes the bias direction u first.

    Verdict (statistics in ``docs/statistics.md``): per output entry, the
    least-squares fit of the mean bias ``c + beta/m + gamma/m^2`` and a z test
    of ``c = 0`` (the bias as m -> infinity, which a correct layer does not
    have: C16); and the chi-square goodness of fit of the C16 law
    ``beta/m + gamma/m^2`` along u.  Holm's procedure over all these tests
    keeps the false-alarm rate at ``alpha`` (normal approximation of means of
    ``trials`` outputs; the O(m^-3) rest of the expansion must be small at
    the smallest m, as in :func:`kernelcheck.verify.ratio_bias`).  Power:
    the report states the asymptotic bias found with probability ``power``;
    a bias r times smaller needs r^2 times the redraws
    (:meth:`RandomFeatureAttentionReport.trials_to_detect`).  The rounding
    tolerance of an output entry is ``gamma_(2(m + nk) + 3) max_k |V_k|`` in
    the layer's output dtype (a positive-weight ratio of sums), propagated
    through the fit.

    Parameters
    ----------
    fn : callable
        ``fn(Q, K, V, m, rng) -> (nq, dv)``; it gets copies of float64 arrays.
    Q : array_like, shape (nq, d)
        Queries.
    K : array_like, shape (nk, d)
        Keys.
    V : array_like, shape (nk, dv)
    kernel : Kernel or None, default None
        The kernel the layer's features estimate (default ``Exponential()``,
        ``exp(q . k)``; softmax attention with the ``1/sqrt(d)`` scaling is
        ``Exponential(scale=d ** -0.5)``).
    num_features : sequence of int, default (16, 32, 64, 128)
        At least three distinct m.
    trials : int, default 2000
        Redraws per m.
    seed : int, SeedSequence or Generator
        Root seed (the pilot and every m have their own children).
    alpha : float, default 0.01
        Family-wise false-alarm rate of all the tests (Holm).
    power : float, default 0.8
        Power of the detectable-bias statement.
    causal : bool, default False
        Compare with causal exact attention.
    executor : concurrent.futures.Executor or None, default None
        Runs the trial blocks (:func:`kernelcheck.stats.run_trials`); the
        result is the same for any executor.
    shard_size : int, default 2048
        Trials per seeded block (part of the meaning of the seed).

    progress : bool or None, default None
        A progress bar on stderr; None: only when stderr is a terminal.
    shards : int or None, default None
        Tasks the trial blocks are grouped into on ``executor`` (the result
        does not depend on it); None: one per block.
    timeout : float or None, default None
        Seconds from the start within which every call of ``fn`` must return,
        else :class:`InvalidArgument` naming ``timeout``; None waits.

    Returns
    -------
    RandomFeatureAttentionReport

    Examples
    --------
    >>> import numpy as np
    >>> def layer(Q, K, V, m, rng):   # positive random features of exp(q . k)
    ...     W = rng.standard_normal((m, Q.shape[1]))
    ...     phi = lambda X: np.exp(X @ W.T - (X * X).sum(1, keepdims=True) / 2)
    ...     fq, fk = phi(Q), phi(K)
    ...     return (fq @ (fk.T @ V)) / (fq @ fk.sum(0))[:, None]
    >>> rng = np.random.default_rng(0)
    >>> Q, K = 0.5 * rng.normal(size=(3, 2)), 0.5 * rng.normal(size=(4, 2))
    >>> V = rng.normal(size=(4, 2))
    >>> random_feature_attention(layer, Q, K, V, trials=500, seed=1).passed
    True
    """
    a = _iv(fn, Q, K, V, kernel, num_features, trials, seed, alpha, power, causal)
    dtype_out: list = []
    probe_rng = np.random.default_rng(child_seed(a.root, _PROBE_PATH))
    _call_layer(fn, a.Q, a.K, a.V, a.ms[0], probe_rng, dtype_out)  # a broken layer fails here
    A = np.asarray(kernelized(a.Q, a.K, a.V, a.kernel, causal=a.causal), dtype=np.float64)
    engine = dict(shard_size=shard_size, executor=executor, shards=shards, progress=progress)

    def make(m, u):
        return _LayerTrials(fn, a.Q, a.K, a.V, m, u, dtype_out)

    series = measure_bias_series(
        make, A, a.ms, a.trials, a.root, engine, max(1, min(a.ms) // 4), 2 * a.trials
    )
    return _report(a, A, series, dtype_out[0])


def _report(a: _Args, A: np.ndarray, series, dtype) -> RandomFeatureAttentionReport:
    P = A.size
    vmax = np.broadcast_to(np.abs(a.V).max(axis=0), A.shape).ravel()
    tol = np.stack(
        [
            (gamma(2 * (m + a.K.shape[0]) + 3, dtype) + gamma(2 * a.K.shape[0] + 3)) * vmax
            for m in a.ms
        ]
    )
    means = np.stack([mo.mean[:P] for mo in series.moments])
    variances = np.stack([mo.variance()[:P] for mo in series.moments])
    proj, proj_se = series.projected()
    proj_tol = tol @ np.abs(series.direction)
    j = asymptotic_bias(
        a.ms, means, variances, a.trials, A.ravel(), tol, proj, proj_se, a.alpha, a.power, proj_tol
    )
    norms, norm_se = bias_norms(series)
    rms = float(np.sqrt(np.mean(A**2)))
    det = median_finite(j.detectable)
    rel_var = _relative_variance(a)
    return RandomFeatureAttentionReport(
        passed=j.passed,
        num_features=a.ms,
        exact=A,
        bias_norm=norms,
        bias_norm_se=norm_se,
        asymptotic_bias=j.intercept.reshape(A.shape),
        asymptotic_bias_se=j.intercept_se.reshape(A.shape),
        z=j.z.reshape(A.shape),
        p_value=j.p_value.reshape(A.shape),
        rejected=j.rejected.reshape(A.shape),
        beta=j.fit.beta,
        beta_se=j.fit.beta_se,
        gamma=j.fit.gamma,
        gamma_se=j.fit.gamma_se,
        gof_p=j.fit.gof_p if j.fit_tested else float("nan"),
        slope=j.fit.slope,
        law_rejected=j.fit_rejected,
        detectable_bias=det,
        detectable_relative=det / rms if rms > 0 else float("inf"),
        trials_to_confirm=j.confirm if not j.passed else float("nan"),
        critical=j.critical,
        relative_variance=rel_var,
        # "Before the 1/m regime" explains a rejection only where the output
        # varies over redraws: an entry with no spread that misses the exact
        # output beyond rounding is an exact difference, whatever the regime.
        inconclusive=bool(
            not j.passed and rel_var > min(a.ms) and not _exact_miss(j.rejected, j.intercept_se)
        ),
        trials=a.trials,
        alpha=a.alpha,
        power=a.power,
        kernel=repr(a.kernel),
        causal=a.causal,
        dtype=str(np.dtype(dtype)),
    )


def _exact_miss(rejected: np.ndarray, se: np.ndarray) -> bool:
    """Whether a rejected entry has no spread over redraws (its bias is exact, not estimated)."""
    return bool((np.asarray(rejected) & (np.asarray(se) == 0)).any())


def _relative_variance(a: _Args) -> float:
    """``max exp(scale |q + k|^2) - 1`` over the pairs for an Exponential target, else NaN."""
    if type(a.kernel) is not Exponential:
        return float("nan")
    s = ((a.Q[:, None, :] + a.K[None, :, :]) ** 2).sum(axis=-1)
    with np.errstate(over="ignore"):
        return float(np.expm1(a.kernel.scale * s).max())
