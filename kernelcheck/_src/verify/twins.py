"""The ``assert_*`` twins of the verifiers, for test suites (one body: ``assert_result``).

Each twin runs its verifier and hands the result to
:func:`~kernelcheck._src.core.results.assert_result`: a verified result is
returned; a refuted one raises ``AssertionError`` whose first line is
``"refuted: "`` and the first failing place; an inconclusive one raises
:class:`~kernelcheck.errors.Inconclusive` (the code was not shown wrong)
with what to do, unless ``allow_inconclusive=True``.  Every twin hides its
own frames from pytest's traceback (``__tracebackhide__``).  The twin of
:func:`kernelcheck.verify.attention`, ``assert_attention_matches``, lives
beside its verifier.
"""

from __future__ import annotations

from typing import Any

from kernelcheck._src.core.results import assert_result
from kernelcheck._src.core.validate import as_bool
from kernelcheck._src.kernels.base import Kernel
from kernelcheck._src.psd.ladder import check_psd
from kernelcheck._src.psd.result import PSDResult
from kernelcheck._src.verify.kernels.feature_map import FeatureMapReport, feature_map
from kernelcheck._src.verify.kernels.kernel import KernelReport, kernel
from kernelcheck._src.verify.random_features.attention import (
    RandomFeatureAttentionReport,
    random_feature_attention,
)
from kernelcheck._src.verify.unbiased.api import UnbiasedReport, unbiased

__all__ = [
    "assert_psd",
    "assert_kernel",
    "assert_feature_map",
    "assert_unbiased",
    "assert_random_feature_attention",
]


def assert_psd(
    K: Any,
    *,
    tol: Any = None,
    method: str = "auto",
    allow_inconclusive: bool = False,
    **kwargs: Any,
) -> PSDResult:
    """Assert that ``K`` is PSD within ``tol`` (pytest twin of :func:`~kernelcheck.check_psd`, C5).

    Parameters
    ----------
    K : array_like, shape (n, n)
        The matrix, as for :func:`~kernelcheck.check_psd`.
    tol : float, Tolerance or None, default None
        As for :func:`~kernelcheck.check_psd`.
    method : str, default "auto"
        As for :func:`~kernelcheck.check_psd`.
    allow_inconclusive : bool, default False
        Return an ``INCONCLUSIVE`` result instead of raising
        :class:`~kernelcheck.errors.Inconclusive`.
    **kwargs
        The other keyword arguments of :func:`~kernelcheck.check_psd`.

    Returns
    -------
    PSDResult
        The result, when ``K`` is PSD within ``tol``.

    Raises
    ------
    AssertionError
        ``NOT_PSD``: ``"refuted: "`` and the witness (its support,
        ``v^T K v / v^T v`` exactly, the margin below ``-tol``, the rung),
        then the result's line with the enclosure of ``lambda_min``.
    kernelcheck.errors.Inconclusive
        ``INCONCLUSIVE`` (unless ``allow_inconclusive``), with the reason.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.testing import assert_psd
    >>> assert_psd(np.eye(3)).verdict.name
    'POSITIVE_DEFINITE'
    """
    __tracebackhide__ = True
    allow_inconclusive = as_bool(allow_inconclusive, "allow_inconclusive")
    r = check_psd(K, tol=tol, method=method, **kwargs)
    return assert_result(r, allow_inconclusive=allow_inconclusive)


def assert_kernel(
    kernel_: Any, X: Any = None, *, allow_inconclusive: bool = False, **kwargs: Any
) -> KernelReport:
    """Assert that ``kernel_`` is a kernel (pytest twin of :func:`~kernelcheck.verify.kernel`).

    Claims C5, C6.

    Parameters
    ----------
    kernel_ : Kernel or callable
        As ``kernel`` of :func:`~kernelcheck.verify.kernel`.
    X : array_like, shape (n, d), or None, default None
        The points; None searches for a counterexample (then ``dim`` is required).
    allow_inconclusive : bool, default False
        Return an inconclusive report instead of raising
        :class:`~kernelcheck.errors.Inconclusive`.
    **kwargs
        The other keyword arguments of :func:`~kernelcheck.verify.kernel`.

    Returns
    -------
    KernelReport
        The report, when it passes.

    Raises
    ------
    AssertionError
        For a violation: ``"refuted: "`` with the witness value against
        ``-tol``, then the report's line, the witness points and vector, the
        value ``v^T G v / v^T v`` at each precision of the ladder and the
        tolerance with its source.
    kernelcheck.errors.Inconclusive
        For an inconclusive report (unless ``allow_inconclusive``).

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck import Linear
    >>> from kernelcheck.testing import assert_kernel
    >>> assert_kernel(Linear(), np.eye(3)).passed
    True
    """
    __tracebackhide__ = True
    allow_inconclusive = as_bool(allow_inconclusive, "allow_inconclusive")
    return assert_result(kernel(kernel_, X, **kwargs), allow_inconclusive=allow_inconclusive)


def assert_feature_map(
    phi: Any,
    X: Any,
    Y: Any = None,
    *,
    kernel: Kernel | None = None,
    feature_ops: int | None = None,
    timeout: float | None = None,
) -> FeatureMapReport:
    """Assert that ``phi`` reproduces its kernel (pytest twin of ``verify.feature_map``).

    Claims C4, C7-C9.

    Parameters
    ----------
    phi : FeatureMap or callable
        As for :func:`~kernelcheck.verify.feature_map`.
    X : array_like, shape (n, d)
        Points.
    Y : array_like, shape (m, d), or None, default None
        Points; None means ``Y = X``.
    kernel : Kernel or None, default None
        The kernel to reproduce; defaults to ``phi.kernel``.
    feature_ops : int or None, default None
        Rounded operations behind one feature entry (see
        :func:`~kernelcheck.verify.feature_map`).
    timeout : float or None, default None
        Seconds within which every call of ``phi`` must return.

    Returns
    -------
    FeatureMapReport
        The report, when every entry is within its tolerance.

    Raises
    ------
    AssertionError
        ``"refuted: "`` and the worst entry, ``phi(x_i) . phi(y_j)`` against
        ``k(x_i, y_j)`` and its tolerance, then the report's line and the
        error model.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck import Linear
    >>> from kernelcheck.testing import assert_feature_map
    >>> _ = assert_feature_map(Linear().features(), np.eye(3))
    """
    __tracebackhide__ = True
    report = feature_map(phi, X, Y, kernel=kernel, feature_ops=feature_ops, timeout=timeout)
    return assert_result(report)


def assert_unbiased(
    sample: Any,
    target: Any,
    X: Any,
    Y: Any = None,
    *,
    allow_inconclusive: bool = False,
    **kwargs: Any,
) -> UnbiasedReport:
    """pytest twin of :func:`~kernelcheck.verify.unbiased` (claims C13, C16-C18).

    Parameters
    ----------
    sample : RandomFeatureSampler or callable
        As for :func:`~kernelcheck.verify.unbiased`.
    target : Kernel or callable
        As for :func:`~kernelcheck.verify.unbiased`.
    X : array_like, shape (n, d)
        Points.
    Y : array_like, shape (m, d), or None, default None
        Points; None means ``Y = X``.
    allow_inconclusive : bool, default False
        Return an inconclusive report (some pairs untestable at this number
        of trials, none failed) instead of raising
        :class:`~kernelcheck.errors.Inconclusive`.  A failing report always raises.
    **kwargs
        The other keyword arguments of :func:`~kernelcheck.verify.unbiased`
        (``trials`` and ``seed`` are required).

    Returns
    -------
    UnbiasedReport
        The report, when it passes.

    Raises
    ------
    AssertionError
        For a failing report: ``"refuted: "`` and the first biased pair, then
        the report's line (with what to do: a correct estimator fails at rate
        ``alpha``, so confirm with another seed and the trials given) and the
        failing pairs.
    kernelcheck.errors.Inconclusive
        For an inconclusive report (unless ``allow_inconclusive``): the
        trials after which every pair is testable, and the untestable pairs.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.kernels import Exponential
    >>> from kernelcheck.features import PositiveRandomFeatures
    >>> from kernelcheck.testing import assert_unbiased
    >>> X = 1.5 * np.eye(2)   # |x + y|^2 = 9: too skewed to test with 500 trials
    >>> rep = assert_unbiased(PositiveRandomFeatures.sampler(2, 8), Exponential(), X,
    ...                       trials=500, seed=0, allow_inconclusive=True)
    >>> str(rep.outcome)
    'inconclusive'
    """
    __tracebackhide__ = True
    allow_inconclusive = as_bool(allow_inconclusive, "allow_inconclusive")
    report = unbiased(sample, target, X, Y, **kwargs)
    return assert_result(report, allow_inconclusive=allow_inconclusive)


def assert_random_feature_attention(
    fn: Any, Q: Any, K: Any, V: Any, *, allow_inconclusive: bool = False, **kwargs: Any
) -> RandomFeatureAttentionReport:
    """pytest twin of :func:`~kernelcheck.verify.random_feature_attention` (claim C16).

    Parameters
    ----------
    fn : callable
        ``fn(Q, K, V, m, rng)``, as for :func:`~kernelcheck.verify.random_feature_attention`.
    Q : array_like, shape (nq, d)
        Queries.
    K : array_like, shape (nk, d)
        Keys.
    V : array_like, shape (nk, dv)
        Values.
    allow_inconclusive : bool, default False
        Return an inconclusive report (a test rejected before the 1/m regime)
        instead of raising :class:`~kernelcheck.errors.Inconclusive`.
    **kwargs
        The other keyword arguments of
        :func:`~kernelcheck.verify.random_feature_attention` (``seed`` is required).

    Returns
    -------
    RandomFeatureAttentionReport
        The report, when no test rejects.

    Raises
    ------
    AssertionError
        ``"refuted: "`` and the most significant biased output entry, then
        the report's line (the largest asymptotic bias, the C16 fit, how many
        redraws a confirming run needs) and the rejected entries.
    kernelcheck.errors.Inconclusive
        When a test rejected before the 1/m regime (unless ``allow_inconclusive``).

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.testing import assert_random_feature_attention
    >>> def biased(Q, K, V, m, rng):   # the features of another kernel: exp(q . k / 2)
    ...     W = rng.standard_normal((m, Q.shape[1])) / np.sqrt(2)
    ...     phi = lambda X: np.exp(X @ W.T - (X * X).sum(1, keepdims=True) / 4)
    ...     fq, fk = phi(Q), phi(K)
    ...     return (fq @ (fk.T @ V)) / (fq @ fk.sum(0))[:, None]
    >>> Q, K = 0.5 * np.eye(2), 0.5 * np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> V = np.eye(3)[:, :2]
    >>> try:
    ...     assert_random_feature_attention(biased, Q, K, V, trials=300, seed=0)
    ... except AssertionError as e:
    ...     print(str(e).split(" is biased")[0])
    refuted: output (1, 0)
    """
    __tracebackhide__ = True
    allow_inconclusive = as_bool(allow_inconclusive, "allow_inconclusive")
    report = random_feature_attention(fn, Q, K, V, **kwargs)
    return assert_result(report, allow_inconclusive=allow_inconclusive)
