"""The ratio of unbiased estimates is biased: random-feature attention (claim C16).

:func:`ratio_bias` shows that attention outputs built from unbiased numerator
and denominator estimates are biased, with a bias shrinking like 1/m.  The
outputs are computed by the attention forms themselves (``parallel`` on the
random features, ``kernelized`` with the target kernel for the exact output);
the statistics are described in ``docs/statistics.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from scipy.special import chdtrc, ndtri

from kernelcheck._src.attention.families.kernelized.forms import kernelized
from kernelcheck._src.attention.families.linear.forms import parallel
from kernelcheck._src.core.results import Result
from kernelcheck._src.core.rounding import default_feature_ops, gamma
from kernelcheck._src.core.validate import as_int, as_points, as_probability, describe
from kernelcheck._src.mc.engine import (
    DEFAULT_SHARD_SIZE,
    root_seed_sequence,
    run_trials,
    shard_seed,
)
from kernelcheck._src.verify.unbiased.trials import sampler_name
from kernelcheck.errors import InvalidArgument, NumericalFailure

__all__ = [
    "ratio_bias",
    "RatioBiasResult",
    "BiasSeries",
    "measure_bias_series",
    "BiasFit",
    "fit_bias",
    "bias_norms",
    "AttentionTrials",
    "values_and_feature_counts",
    "output_rounding",
]


class AttentionTrials:
    """Random-feature attention outputs of many trials (batched).

    Returns (n, nq * dv + 1): the flattened outputs and, last, their
    projection on the fixed unit vector ``direction``.
    """

    def __init__(self, sampler, Q, K, V, direction, causal=False):
        self.sampler, self.Q, self.K, self.V = sampler, Q, K, V
        self.direction, self.causal = direction, causal

    def __call__(self, rng, n):
        proto = self.sampler._proto
        Qs = proto._prepare(self.Q, "Q")
        Ks = proto._prepare(self.K, "K")
        outs = []
        for c, ((FQ, _lq), (FK, lk)) in self.sampler.batch_features(rng, n, [Qs, Ks]):
            # per-query factors cancel; key factors only up to their common maximum
            wk = np.exp(lk - lk.max(axis=-1, keepdims=True))
            FKw = FK * wk[..., None]
            V = np.broadcast_to(self.V, (c,) + self.V.shape)
            flat = parallel(FQ, FKw, V, causal=self.causal).reshape(c, -1)  # (c, nq * dv)
            outs.append(np.concatenate([flat, (flat @ self.direction)[:, None]], axis=1))
        return np.concatenate(outs)


@dataclass(frozen=True, repr=False)
class RatioBiasResult(Result):
    """Report of :func:`ratio_bias` (claim C16).

    Attributes
    ----------
    passed : bool
        The claim holds: ``beta`` (the 1/m coefficient) is nonzero at level
        ``alpha`` and the model ``beta/m + gamma/m^2`` fits (goodness-of-fit
        p-value above ``alpha``).
    num_features : tuple of int
        The m values.
    bias_norm, bias_norm_se : tuple of float
        ``sqrt(max(|mean - A|^2 - sum var / N, 0))`` per m (the noise-corrected
        Frobenius norm of the output's bias) and its delta-method standard error.
    projected_bias, projected_se : tuple of float
        ``<mean - A, u>`` per m and its standard error (u: unit bias direction
        from an independent pilot run at a quarter of the smallest m).
    beta, beta_se, gamma, gamma_se : float
        Weighted least-squares fit ``<b(m), u> = beta / m + gamma / m^2``
        (``+ delta / m^3`` with five or more values of m).
    gof_p : float
        Chi-square goodness-of-fit p-value of that fit (``len(m) - terms`` dof).
    slope : float
        Log-log slope of ``|<b(m), u>|`` between the two largest m (tends to -1).
    relative_variance : float
        Largest relative variance ``Var / k^2`` of a one-feature kernel
        estimate over the (q, k) pairs (closed form, NaN if unknown): the
        1/m law is asymptotic and shows once m is well above this number.
    trials, alpha : number
        Settings.
    sampler : str
        The sampler (its m replaced by each entry of ``num_features``).
    """

    passed: bool
    num_features: tuple
    bias_norm: tuple
    bias_norm_se: tuple
    projected_bias: tuple
    projected_se: tuple
    beta: float
    beta_se: float
    gamma: float
    gamma_se: float
    gof_p: float
    slope: float
    relative_variance: float
    trials: int
    alpha: float
    sampler: str

    def _text(self) -> str:
        return (
            "ratio bias (C16): attention output "
            f"bias |b| = {self.bias_norm[0]:.3g} at m = {self.num_features[0]}; "
            f"b(m) = beta/m + gamma/m^2 with beta = {self.beta:.3g} +- {self.beta_se:.2g} "
            f"(z = {self.beta / self.beta_se:.3g}), fit p = {self.gof_p:.3g}; "
            f"log-log slope at the largest m {self.slope:.3f} (tends to -1)"
        )


def ratio_bias(
    sampler,
    Q,
    K,
    V,
    *,
    num_features=(8, 16, 32, 64, 128),
    trials: int = 20000,
    seed: Any,
    alpha: float = 0.01,
    executor=None,
    shard_size: int = DEFAULT_SHARD_SIZE,
    progress: bool | None = None,
    shards: int | None = None,
) -> RatioBiasResult:
    """Show that random-feature attention is biased, with bias ~ 1/m (claim C16).

    The output ``a_i = phi(q_i)^T S / phi(q_i)^T z`` (``S = sum_j phi(k_j) v_j^T``,
    ``z = sum_j phi(k_j)``) is a ratio of two unbiased estimates; expanding
    ``1 / D`` around ``E D`` gives
    ``E[N/D] - E N / E D = (E N Var D / E D - Cov(N, D)) / (E D)^2 + O(m^-2)``,
    and for means of m i.i.d. terms every central moment of order k is
    ``O(m^-ceil(k/2))``: the bias is ``beta / m + gamma / m^2 + O(m^-3)``.

    A pilot run (its own seed, twice the trials, at a quarter of the
    smallest m) gives the unit bias direction u; for each m the engine
    estimates ``E[a]`` and ``E<a, u>`` over ``trials`` trials, so
    ``<b(m), u>`` is an unbiased, nearly normal estimate.  A weighted
    least-squares fit of ``beta / m + gamma / m^2`` (plus ``delta / m^3``
    with five or more values of m) decides the claim: ``beta != 0``
    (two-sided z test at ``alpha``) and the fit's chi-square goodness of fit
    (p > ``alpha``).

    The expansion is asymptotic: its coefficients grow with the relative
    variance of one feature, ``exp(|q' + k'|^2) - 1`` for positive features,
    so the 1/m law shows once m is well above it (``relative_variance`` in
    the result); for larger norms the fit sees the pre-asymptotic regime and
    fails.  The positive maps are the ones this applies to: with
    trigonometric features the denominator takes both signs and the ratio
    has no finite mean.

    Parameters
    ----------
    sampler : RandomFeatureSampler
        E.g. ``PositiveRandomFeatures.sampler(d, m)`` (its m is replaced by
        each entry of ``num_features``).
    Q : array_like, shape (nq, d)
        Queries.
    K : array_like, shape (nk, d)
        Keys.
    V : array_like, shape (nk, dv)
    num_features : sequence of int, default (8, 16, 32, 64, 128)
        At least three values of m.
    trials : int, default 20000
        Trials per m.
    seed : int, SeedSequence or Generator
        Root seed (the pilot and every m have their own children).
    alpha : float, default 0.01
        Level of the z test of ``beta`` and of the goodness of fit.

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

    Returns
    -------
    RatioBiasResult

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.features import PositiveRandomFeatures
    >>> rng = np.random.default_rng(0)
    >>> Q, K, V = rng.normal(size=(3, 2)), rng.normal(size=(5, 2)), rng.normal(size=(5, 2))
    >>> r = ratio_bias(PositiveRandomFeatures.sampler(2, 4), Q, K, V, num_features=(4, 8, 16),
    ...                trials=20000, seed=1)
    >>> r.beta / r.beta_se > 3
    True
    """
    a = _ratio_bias_iv(sampler, Q, K, V, num_features, trials, seed, alpha)
    engine = dict(shard_size=shard_size, executor=executor, shards=shards, progress=progress)
    norms, norm_se, proj, proj_se = _measure_bias(sampler, a, engine)
    _require_noise_above_rounding(sampler, a, proj_se)
    fit = fit_bias(a.ms, proj, proj_se, a.alpha)
    rel_var = float("nan")
    if callable(getattr(sampler, "theory", None)):
        one = sampler.with_num_features(1).theory(a.Q, a.K, order=2)["central"][2]
        rel_var = float(np.max(one))
    return RatioBiasResult(
        num_features=a.ms,
        bias_norm=norms,
        bias_norm_se=norm_se,
        projected_bias=proj,
        projected_se=proj_se,
        relative_variance=rel_var,
        trials=a.trials,
        alpha=a.alpha,
        sampler=sampler_name(sampler),
        **fit._asdict(),
    )


def output_rounding(V: np.ndarray, nk: int, D: int, d: int) -> float:
    """Bound on ``|a_hat_i - a_i|`` (any entry) of one trial's computed output (C16).

    Model: each weight ``w_ij = phi(q_i) . phi(k_j) c_j`` (positive features
    of ``e = 2 d + 8`` roundings each, :func:`default_feature_ops`; a length-D
    inner product; the key scale ``c_j``) has a relative error of at most
    ``delta = gamma_(D + 2 e + 2)``; a convex combination with weights
    perturbed by ``1 + delta_j`` moves by at most ``2 delta / (1 - delta)
    max |v|``; the sums of ``parallel`` add ``gamma_(2 n + 2 D + 4)`` to the
    numerator and denominator (:func:`~kernelcheck.attention.linear_error_bound`),
    moving the quotient by at most ``(2 gamma + u) max |v| / (1 - gamma)``.
    Together: ``4 gamma_k max |v|`` with ``k = 2 n + 3 D + 2 e + 6``.
    """
    k = 2 * nk + 3 * D + 2 * default_feature_ops(d) + 6
    return 4.0 * gamma(k) * float(np.abs(V).max())


def _require_noise_above_rounding(sampler, a: _RatioBiasArgs, proj_se: tuple) -> None:
    """Refuse a fit whose data is rounding: ``se(<b(m), u>) <= sqrt(P) output_rounding``.

    The projected bias of one trial is off by at most ``sqrt(P)`` times the
    entrywise bound (``u`` a unit vector, P outputs), and its mean by as much,
    deterministically: where the standard error is not above that, the data
    at m is rounding (an exact ratio: one key, identical keys, values equal
    over the keys) and a fit of ``beta / m`` on it decides nothing.
    """
    P = a.Q.shape[0] * a.V.shape[1]
    for m, se in zip(a.ms, proj_se, strict=True):
        fm = sampler.with_num_features(m)
        D = fm.num_features * getattr(fm._proto, "_per_row", 1)
        floor = math.sqrt(P) * output_rounding(a.V, a.K.shape[0], D, a.Q.shape[1])
        if not se > floor:
            raise NumericalFailure(
                f"the attention outputs at m = {m} vary between trials only by rounding "
                f"(standard error {se:.3g} <= rounding bound {floor:.3g}; 0 also when the "
                "squared spread underflows): the ratio is exact in real arithmetic or nearly so "
                "(one key, identical keys, `V` equal over the keys, one key dominating every "
                "weight), so there is no bias to fit in float64 (C16)"
            )


class _RatioBiasArgs(NamedTuple):
    """The checked arguments of :func:`ratio_bias`."""

    Q: np.ndarray
    K: np.ndarray
    V: np.ndarray
    ms: tuple
    trials: int
    alpha: float
    root: np.random.SeedSequence


def _ratio_bias_iv(sampler, Q, K, V, num_features, trials, seed, alpha) -> _RatioBiasArgs:
    if not (
        callable(getattr(sampler, "with_num_features", None))
        and callable(getattr(sampler, "batch_features", None))
    ):
        raise InvalidArgument(
            "`sampler` must be a RandomFeatureSampler (e.g. PositiveRandomFeatures.sampler(d, m)),"
            f" got {describe(sampler)}"
        )
    Q = as_points(Q, "Q", dim=sampler.dim).astype(np.float64)
    K = as_points(K, "K", dim=sampler.dim).astype(np.float64)
    V, ms = values_and_feature_counts(V, K, num_features)
    same_keys, same_values = bool((K == K[0]).all()), bool((V == V[0]).all())
    if same_keys or same_values:
        what = "identical keys" if same_keys else "`V` equal over the keys"
        raise InvalidArgument(
            f"the attention output is the same in every trial "
            f"({'one key' if K.shape[0] == 1 else what}): the ratio is exact, so there is no "
            "bias to fit (C16); give distinct keys `K` and values `V` that differ over them"
        )
    trials = as_int(trials, "trials", minimum=2)
    alpha = as_probability(alpha, "alpha")
    return _RatioBiasArgs(Q, K, V, ms, trials, alpha, root_seed_sequence(seed))


def values_and_feature_counts(V, K: np.ndarray, num_features) -> tuple[np.ndarray, tuple]:
    """``V`` checked against ``K`` (float64, one row per key) and at least three distinct m."""
    V = as_points(V, "V").astype(np.float64)
    if V.shape[0] != K.shape[0]:
        raise InvalidArgument(
            f"`V` must have one row per row of `K` ({K.shape[0]}), got {describe(V)}"
        )
    if isinstance(num_features, (str, bytes)) or not hasattr(num_features, "__iter__"):
        raise InvalidArgument(
            f"`num_features` must be a sequence of at least three m, got {describe(num_features)}"
        )
    ms = tuple(as_int(m, "num_features", minimum=1) for m in num_features)
    if len(ms) < 3 or len(set(ms)) != len(ms):
        raise InvalidArgument(f"`num_features` must list at least three distinct m, got {ms}")
    return V, ms


class BiasSeries(NamedTuple):
    """The runs behind a bias-against-m fit: per m, the moments of the flattened outputs.

    ``moments[q]`` holds ``nq * dv`` output entries and, last, their projection
    on ``direction`` (a unit vector from an independent pilot run).
    """

    exact: np.ndarray
    direction: np.ndarray
    moments: tuple

    def projected(self) -> tuple[tuple, tuple]:
        """``<mean - A, u>`` per m and its standard error."""
        P = self.exact.size
        proj = tuple(float(mo.mean[P] - self.exact @ self.direction) for mo in self.moments)
        se = tuple(float(mo.std_error()[P]) for mo in self.moments)
        return proj, se


def measure_bias_series(
    make_trials, exact, ms, trials, root, engine: dict, pilot_m: int, pilot_trials: int
) -> BiasSeries:
    """Run ``make_trials(m, u)`` at every m of ``ms`` after a pilot that fixes ``u``.

    ``make_trials(m, u)`` is a trial function returning, per trial, the
    flattened attention output at m features and its projection on ``u``.
    Seeds: the run at ``ms[q]`` is ``shard_seed(root, q)``, the pilot (at
    ``pilot_m``, ``pilot_trials`` trials) ``shard_seed(root, len(ms))``, so the
    pilot is independent of the runs it directs.
    """
    exact = np.asarray(exact, dtype=np.float64).ravel()
    P = exact.size

    def run(m, q, u, n):
        return run_trials(
            make_trials(m, u), n, seed=shard_seed(root, q), desc=f"attention m={m}", **engine
        )

    pilot = run(pilot_m, len(ms), np.zeros(P), pilot_trials)
    with np.errstate(over="ignore"):
        b0 = pilot.mean[:P] - exact
    top = float(np.abs(b0).max())  # both terms are finite; their difference may not be
    if not math.isfinite(top):
        raise NumericalFailure(
            "the pilot run's mean output minus the exact attention output exceeds the float64 "
            "range; scale `V` (or the layer's output) down"
        )
    # the direction of b0 from b0 / max |b0|: |b0|^2 itself may overflow
    u = b0 / top / float(np.linalg.norm(b0 / top)) if top > 0 else np.full(P, 1.0 / math.sqrt(P))
    moments = tuple(run(m, q, u, trials) for q, m in enumerate(ms))
    return BiasSeries(exact, u, moments)


def _measure_bias(sampler, a: _RatioBiasArgs, engine: dict) -> tuple[tuple, ...]:
    """Per m: the noise-corrected bias norm, its standard error, ``<b(m), u>`` and its SE.

    The pilot runs at m / 4, where the bias (~1/m) stands out of the noise
    (~1/sqrt(m)) twice as well, with twice the trials.
    """
    A = kernelized(a.Q, a.K, a.V, sampler.kernel).ravel()  # exact attention with the target kernel

    def make(m, u):
        return AttentionTrials(sampler.with_num_features(m), a.Q, a.K, a.V, u)

    series = measure_bias_series(
        make, A, a.ms, a.trials, a.root, engine, max(1, min(a.ms) // 4), 2 * a.trials
    )
    norms, norm_se = bias_norms(series)
    proj, proj_se = series.projected()
    return norms, norm_se, proj, proj_se


def bias_norms(series: BiasSeries) -> tuple[tuple, tuple]:
    """Per m: ``sqrt(max(|mean - A|^2 - sum var / N, 0))`` and its delta-method SE."""
    P = series.exact.size
    norms, norm_se = [], []
    for mo in series.moments:
        b = mo.mean[:P] - series.exact
        var = mo.variance()[:P] / mo.count
        B = float((b * b).sum() - var.sum())
        se_B = math.sqrt(float(4.0 * (b * b * var).sum() + 2.0 * (var * var).sum()))
        root_B = math.sqrt(max(B, 0.0))
        norms.append(root_B)
        norm_se.append(se_B / (2.0 * root_B) if root_B > 0 else float("inf"))
    return tuple(norms), tuple(norm_se)


class BiasFit(NamedTuple):
    """The weighted least-squares fit of ``<b(m), u>`` and the verdict on it."""

    passed: bool
    beta: float
    beta_se: float
    gamma: float
    gamma_se: float
    gof_p: float
    slope: float


def fit_bias(ms: tuple, proj: tuple, proj_se: tuple, alpha: float) -> BiasFit:
    """Fit ``beta / m + gamma / m^2 (+ delta / m^3 with five or more m)``, weights ``1 / se^2``.

    Passed: ``|beta| > z_(1 - alpha/2) se(beta)`` and chi-square goodness of fit ``p > alpha``.
    """
    m_arr = np.array(ms, dtype=float)
    y = np.array(proj)
    w = 1.0 / np.array(proj_se) ** 2
    powers = (1, 2, 3) if len(ms) >= 5 else (1, 2)
    Xd = np.stack([m_arr ** -float(k) for k in powers], axis=1)
    XtW = Xd.T * w
    cov = np.linalg.inv(XtW @ Xd)
    coef = cov @ (XtW @ y)
    resid = y - Xd @ coef
    chi = float((w * resid**2).sum())
    # chdtrc is the chi-square survival function scipy.stats.chi2.sf evaluates;
    # calling it directly keeps scipy.stats (a third of a second) out of the import.
    gof_p = float(chdtrc(len(ms) - len(powers), chi))
    beta, gamma_ = float(coef[0]), float(coef[1])
    beta_se, gamma_se = float(math.sqrt(cov[0, 0])), float(math.sqrt(cov[1, 1]))
    order = np.argsort(m_arr)
    i1, i2 = order[-2], order[-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = float(np.log(abs(y[i2]) / abs(y[i1])) / np.log(m_arr[i2] / m_arr[i1]))
    zc = float(ndtri(1.0 - alpha / 2.0))
    passed = bool(abs(beta) > zc * beta_se and gof_p > alpha)
    return BiasFit(passed, beta, beta_se, gamma_, gamma_se, gof_p, slope)
