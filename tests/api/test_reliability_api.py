"""Bad-input tables for the rest of the public API, and a test that keeps every name tabled.

The contract (docs/reliability.md): a public callable either answers or raises
a clean error -- ``InvalidArgument`` (or its subclass ``InfiniteFeatureSpace``)
whose message opens with the argument in backticks, or names the size an
intermediate would need -- never a bare ``TypeError`` / ``ValueError`` /
``IndexError`` / ``AttributeError`` from NumPy or Python, never a verdict
computed from NaN, never a silent acceptance.

The tables here cover what the other ``tests/**/test_reliability*.py`` files do
not: the kernel nodes built directly (``Sum``, ``Scaled``, ``Product``,
``Power``, ``Exp``, ``FunctionKernel``, ``ExactFeatureMap``),
:mod:`kernelcheck.scaling`, ``strategies.feature_maps``, the ``testing``
twins, :mod:`kernelcheck.distributed` (argument checks only: no cluster is
started) and :mod:`kernelcheck.claims` (checked before any claim runs, or with
the quickest claim at the quickest level).

``test_every_public_callable_has_a_bad_input_table`` parses every
``tests/**/test_reliability*.py`` with :mod:`ast` and fails when a public
function or user-constructed class has no row in any table (a test that takes
a catalogue argument of ``tests/conftest.py`` counts as a table of the
catalogue's entries).
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import io
import math
import re
import types
import warnings
from pathlib import Path

import numpy as np
import pytest

from kernelcheck import claims as C
from kernelcheck import distributed as D
from kernelcheck import scaling as S
from kernelcheck import strategies as kst
from kernelcheck import testing as T
from kernelcheck.errors import InfiniteFeatureSpace, InvalidArgument
from kernelcheck.features import ExactFeatureMap, PositiveRandomFeatures
from kernelcheck.kernels import (
    Exp,
    Exponential,
    FunctionKernel,
    Linear,
    Power,
    Product,
    Scaled,
    Sum,
)
from tests.conftest import CATALOGUE_ARGUMENTS

IA = InvalidArgument  # the error most rows expect
HERE = Path(__file__).resolve()
ROOT = HERE.parents[2]
X = np.random.default_rng(11).normal(size=(3, 2))
SZ = (8, 16, 32)


def _readonly(a):
    a = np.array(a, dtype=np.float64)
    a.setflags(write=False)
    return a


def _ones(n):
    return np.ones(n)


def _boom(*args):
    raise ZeroDivisionError("boom")


def _enter(context):
    """Enter and leave a context manager (``dask_executor`` validates on entry)."""
    with context:
        pass  # pragma: no cover - every row here is refused before a cluster starts


@functools.cache
def _measurement():
    """A real Measurement of three tiny sizes (no memory pass, one repeat)."""
    return S.measure(np.sum, SZ, make_input=_ones, repeats=1, warmup=0, min_time=0, memory=False)


def _fk(**kw):
    return FunctionKernel(lambda x, y: float(x @ y), **kw)


def _mp(value):
    return FunctionKernel(lambda x, y: 1.0, mp_function=lambda x, y: value)


# ---------------------------------------------------------------------------
# Bad-input tables: (id, call, error, message regex from the start)
# ---------------------------------------------------------------------------

KERNEL_NODE_BAD = [
    ("sum-str", lambda: Sum(Linear(), "a"), IA, r"^`right` must be a Kernel or a real"),
    ("sum-bool", lambda: Sum(True, Linear()), IA, r"^`left` must be a Kernel or a"),
    ("sum-array", lambda: Sum(np.ones(2), Linear()), IA, r"^`left` must be a Kernel"),
    ("sum-complex", lambda: Sum(1j, Linear()), IA, r"^`left` must be a Kernel"),
    ("sum-nan", lambda: Sum(math.nan, Linear()), IA, r"^`left` must be finite, got"),
    ("sum-inf", lambda: Sum(Linear(), math.inf), IA, r"^`right` must be finite, got"),
    ("add-nan", lambda: Linear() + math.nan, IA, r"^`other` must be finite, got nan"),
    ("scaled-str", lambda: Scaled("a", Linear()), IA, r"^`c` must be a real number"),
    ("scaled-nan", lambda: Scaled(math.nan, Linear()), IA, r"^`c` must be finite"),
    ("scaled-array", lambda: Scaled(np.ones(2), Linear()), IA, r"^`c` must be a real"),
    ("scaled-kernel", lambda: Scaled(2.0, "k"), IA, r"^`kernel` must be a Kernel or"),
    ("product-none", lambda: Product(Linear(), None), IA, r"^`right` must be a Kernel"),
    ("product-nan", lambda: Product(Linear(), math.nan), IA, r"^`right` must be fin"),
    ("power-neg", lambda: Power(Linear(), -1), IA, r"^`m` must be >= 0, got -1"),
    ("power-float", lambda: Power(Linear(), 2.0), IA, r"^`m` must be an integer \(got"),
    ("power-bool", lambda: Power(Linear(), True), IA, r"^`m` must be an integer, got b"),
    ("power-huge", lambda: Power(Linear(), 10**6), IA, r"^`m` must be <= 64, got 1000"),
    ("power-kernel", lambda: Power("k", 2), IA, r"^`kernel` must be a Kernel or a"),
    ("exp-neg", lambda: Exp(Linear(), -1), IA, r"^`order` must be >= 0, got -1"),
    ("exp-float", lambda: Exp(Linear(), 1.5), IA, r"^`order` must be an integer"),
    ("exp-huge", lambda: Exp(Linear(), 10**9), IA, r"^`order` must be <= 64"),
    ("exp-none", lambda: Exp(None), IA, r"^`kernel` must be a Kernel or a real"),
    ("fk-not-callable", lambda: FunctionKernel(5), IA, r"^`f` must be callable, got"),
    ("fk-mp", lambda: _fk(mp_function=5), IA, r"^`mp_function` must be callable"),
    ("fk-name", lambda: _fk(name=5), IA, r"^`name` must be a string, got int 5"),
    (
        "fk-vectorized",
        lambda: _fk(vectorized="no"),
        IA,
        r"^`vectorized` must be True or False, got str 'no'",
    ),
    ("fk-raises", lambda: FunctionKernel(_boom)(X), IA, r"^`f` \(_boom\) raised Zero"),
    (
        "fk-shape",
        lambda: FunctionKernel(lambda a, b: np.ones(3), vectorized=True)(X),
        IA,
        r"^`f` \(<lambda>\) with vectorized=True must broadcast",
    ),
    (
        "fk-complex",
        lambda: FunctionKernel(lambda x, y: 1j)(X),
        IA,
        r"^`f` \(<lambda>\) returned complex .*; expected a real number",
    ),
    (
        "fk-strings",
        lambda: FunctionKernel(lambda a, b: np.full((3, 3), "a"), vectorized=True)(X),
        IA,
        r"^`f` \(<lambda>\) returned array of shape \(3, 3\) and dtype <U1; expected real",
    ),
    (
        "fk-nan",
        lambda: FunctionKernel(lambda x, y: math.nan)(X),
        IA,
        r"^`f` \(<lambda>\) returned a non-finite value",
    ),
    (
        "fk-X",
        lambda: _fk()(np.array([[1.0, np.inf]])),
        IA,
        r"^`X` must be finite",
    ),
    (
        "fk-mp-raises",
        lambda: FunctionKernel(lambda x, y: 1.0, mp_function=_boom).gram_mp(X, dps=20),
        IA,
        r"^`mp_function` of kernel_from_function\(<lambda>\) raised ZeroDivisionError",
    ),
    (
        "fk-mp-nan",
        lambda: _mp(math.nan).gram_mp(X, dps=20),
        IA,
        r"^`mp_function` of kernel_from_function\(<lambda>\) returned a non-finite value nan "
        r"at entry \(0, 0\)",
    ),
    (
        "fk-mp-inf",
        lambda: _mp(-math.inf).gram_mp(X, dps=20),
        IA,
        r"^`mp_function` .* returned a non-finite value -inf",
    ),
    (
        "fk-error-bound",
        lambda: _fk().error_bound(X),
        IA,
        r"^`kernel` kernel_from_function\(<lambda>\) has no rounding-error model",
    ),
    (
        "fk-error-bound-negative",
        lambda: FunctionKernel(lambda x, y: 1.0, error_bound=-1.0),
        IA,
        r"^`error_bound` must be >= 0",
    ),
    (
        "fk-error-bound-nan",
        lambda: FunctionKernel(lambda x, y: 1.0, error_bound=math.nan),
        IA,
        r"^`error_bound` must be",
    ),
    (
        "fk-error-bound-shape",
        lambda: FunctionKernel(lambda x, y: 1.0, error_bound=lambda A, B: np.ones(2)).error_bound(
            X
        ),
        IA,
        r"^`error_bound` of kernel_from_function\(<lambda>\) must return a real array of shape",
    ),
    (
        "fk-blocks-and-vectorized",
        lambda: FunctionKernel(lambda x, y: 1.0, vectorized=True, blocks=True),
        IA,
        r"^`vectorized` and `blocks` exclude each other",
    ),
    (
        "efm-kernel",
        lambda: ExactFeatureMap(5),
        IA,
        r"^`kernel` must be a kernelcheck Kernel, got int 5",
    ),
    (
        "efm-infinite",
        lambda: ExactFeatureMap(Exponential()),
        InfiniteFeatureSpace,
        r"^Exponential\(\) has an infinite feature space",
    ),
    (
        "efm-form",
        lambda: ExactFeatureMap(Linear(), "diagonal"),
        IA,
        r"^`form` must be one of 'symmetric', 'tensor'; got 'diagonal'",
    ),
    (
        "efm-form-array",
        lambda: ExactFeatureMap(Linear(), np.array(["a", "b"])),
        IA,
        r"^`form` must be one of 'symmetric', 'tensor'; got array",
    ),
    (
        "efm-form-list",
        lambda: ExactFeatureMap(Linear(), ["tensor"]),
        IA,
        r"^`form` must be one of",
    ),
]


def _measure(**kw):
    args = {"fn": np.sum, "sizes": SZ, "make_input": _ones, "repeats": 1, "warmup": 0}
    args.update(kw)
    fn, sizes = args.pop("fn"), args.pop("sizes")
    return S.measure(fn, sizes, **args)


def _fit(values=(1.0, 2.0, 4.0), sizes=SZ, **kw):
    return S.fit_exponent(sizes, values, **kw)


def _scale(**kw):
    """run_scaling on tiny sizes; every row here is refused before any timing."""
    args = {"sizes": SZ, "d": 2, "num_features": 4, "repeats": 1, "forms": ["parallel"]}
    args.update(kw)
    return S.run_scaling(**args)


def _plot(measurements=None, path="never-written.png", **kw):
    if measurements is None:
        measurements = [_measurement()]
    return S.plot_measurements(measurements, path, **kw)


SCALING_BAD = [
    ("gs-start", lambda: S.geometric_sizes(0, 4), IA, r"^`start` must be >= 1, got 0"),
    ("gs-float", lambda: S.geometric_sizes(1.5, 4), IA, r"^`start` must be an integ"),
    ("gs-str", lambda: S.geometric_sizes("1", 4), IA, r"^`start` must be an integer"),
    ("gs-order", lambda: S.geometric_sizes(4, 4), IA, r"^`stop` must be larger than"),
    (
        "gs-huge",
        lambda: S.geometric_sizes(1, 10**30, num=3),
        IA,
        r"^`stop` must be <= 9007199254740992, got 10{30}$",
    ),
    ("gs-num", lambda: S.geometric_sizes(1, 4, num=1), IA, r"^`num` must be >= 2"),
    (
        "gs-num-huge",
        lambda: S.geometric_sizes(1, 10, num=10**9),
        IA,
        r"^`num` must be at most the 10 integers from `start` = 1 to `stop` = 10, got 1000000000",
    ),
    ("ar-sizes", lambda: S.accepted_range(2.0, [8]), IA, r"^`sizes` must hold at least 2"),
    ("ar-order", lambda: S.accepted_range(2.0, [8, 4]), IA, r"^`sizes` must be strictly"),
    ("ar-exp", lambda: S.accepted_range("2", [4, 8]), IA, r"^`exponent` must be a real"),
    ("ar-nan", lambda: S.accepted_range(float("nan"), [4, 8]), IA, r"^`exponent` must be"),
    ("ar-spread", lambda: S.accepted_range(2.0, [4, 8], spread=1.0), IA, r"^`spread` must be"),
    ("m-fn", lambda: _measure(fn=5), IA, r"^`fn` must be callable, got int 5"),
    ("m-input", lambda: _measure(make_input=5), IA, r"^`make_input` must be callable"),
    ("m-sizes-one", lambda: _measure(sizes=[8]), IA, r"^`sizes` must hold at least 2"),
    ("m-sizes-dup", lambda: _measure(sizes=[8, 8]), IA, r"^`sizes` must be strictly"),
    ("m-sizes-zero", lambda: _measure(sizes=[0, 8]), IA, r"^`sizes\[0\]` must be >= 1"),
    ("m-sizes-str", lambda: _measure(sizes="ab"), IA, r"^`sizes` must be a sequence"),
    ("m-sizes-int", lambda: _measure(sizes=5), IA, r"^`sizes` must be a sequence"),
    (
        "m-sizes-float",
        lambda: _measure(sizes=np.array([8.0, 16.0])),
        IA,
        r"^`sizes\[0\]` must be an integer \(got the float",
    ),
    (
        "m-sizes-2d",
        lambda: _measure(sizes=np.array([[8, 16]])),
        IA,
        r"^`sizes\[0\]` must be an integer, got array of shape \(2,\)",
    ),
    (
        "m-sizes-huge",
        lambda: _measure(sizes=[8, 2**64]),
        IA,
        r"^`sizes\[1\]` must be <= 9007199254740992",
    ),
    ("m-repeats", lambda: _measure(repeats=0), IA, r"^`repeats` must be >= 1, got 0"),
    (
        "m-repeats-huge",
        lambda: _measure(repeats=10**12),
        IA,
        r"^the table of 1000000000000 timed repeats per size would need 3000000000000 entries",
    ),
    ("m-warmup", lambda: _measure(warmup=-1), IA, r"^`warmup` must be >= 0, got -1"),
    ("m-statistic", lambda: _measure(statistic="mean"), IA, r"^`statistic` must be"),
    ("m-min-time", lambda: _measure(min_time=-1), IA, r"^`min_time` must be >= 0"),
    ("m-min-nan", lambda: _measure(min_time=math.nan), IA, r"^`min_time` must be fin"),
    ("m-memory", lambda: _measure(memory="no"), IA, r"^`memory` must be True or Fal"),
    ("m-clock", lambda: _measure(clock="tsc"), IA, r"^`clock` must be one of 'wall'"),
    ("m-clock-list", lambda: _measure(clock=[]), IA, r"^`clock` must be one of"),
    ("m-cost-nan", lambda: _measure(cost=lambda n: math.nan), IA, r"^`cost` must be f"),
    ("m-cost-raises", lambda: _measure(cost=_boom), IA, r"^`cost` raised ZeroDivisi"),
    (
        "m-cost-str",
        lambda: _measure(cost=lambda n: "a"),
        IA,
        r"^`cost` returned str 'a'; expected real",
    ),
    (
        "m-cost-shape",
        lambda: _measure(cost=lambda n: np.ones(2)),
        IA,
        r"^`cost` must have 1 dimension",
    ),
    (
        "m-cost-count",
        lambda: _measure(cost=[1, 2]),
        IA,
        r"^`cost` must give one positive operation count per size \(3\)",
    ),
    ("m-cost-neg", lambda: _measure(cost=[1, 2, -3]), IA, r"^`cost` must give one"),
    ("m-cost-inf", lambda: _measure(cost=[1, 2, math.inf]), IA, r"^`cost` must be fi"),
    ("m-cost-complex", lambda: _measure(cost=[1j, 2, 3]), IA, r"^`cost` must be real"),
    ("m-cost-unit", lambda: _measure(cost_unit=""), IA, r"^`cost_unit` must be a non"),
    ("m-label", lambda: _measure(label=5), IA, r"^`label` must be a string, got int"),
    (
        "m-fn-raises",
        lambda: _measure(fn=_boom),
        IA,
        r"^`fn` at n = 8 raised ZeroDivisionError: boom",
    ),
    (
        "m-fn-raises-traced",
        lambda: _measure(fn=_boom, memory=True, warmup=1),
        IA,
        r"^`fn` at n = 8 raised ZeroDivisionError: boom",
    ),
    (
        "m-input-raises",
        lambda: _measure(make_input=_boom),
        IA,
        r"^`make_input` raised ZeroDivisionError: boom",
    ),
    (
        "m-input-arity",
        lambda: _measure(make_input=lambda n: (1, 2)),  # np.sum(1, 2): axis 2 of a scalar
        IA,
        r"^`fn` at n = 8 raised \w+: axis 2 is out of bounds",
    ),
    ("fe-two-sizes", lambda: _fit([1.0, 2.0], [1, 2]), IA, r"^`sizes` must hold at le"),
    ("fe-bool-size", lambda: _fit(sizes=[True, 2, 3]), IA, r"^`sizes\[0\]` must be an"),
    ("fe-nan", lambda: _fit([1.0, math.nan, 2.0]), IA, r"^`values` must be finite"),
    ("fe-inf", lambda: _fit([1.0, math.inf, 2.0]), IA, r"^`values` must be finite"),
    ("fe-neg", lambda: _fit([1.0, -1.0, 2.0]), IA, r"^`values` must be positive to"),
    ("fe-zero", lambda: _fit([1.0, 0.0, 2.0]), IA, r"^`values` must be positive to"),
    ("fe-shape", lambda: _fit([1.0, 2.0]), IA, r"^`values` must have shape \(3,\) or"),
    ("fe-3d", lambda: _fit(np.ones((3, 2, 2))), IA, r"^`values` must have shape \(3,"),
    ("fe-complex", lambda: _fit(np.ones(3) + 1j), IA, r"^`values` must be real, got c"),
    (
        "fe-object",
        lambda: _fit(np.array([1, 2, None], dtype=object)),
        IA,
        r"^`values` must be a real numeric array, got array of shape \(3,\) and dtype object",
    ),
    ("fe-str", lambda: _fit("abc"), IA, r"^`values` must be a numeric array, got str"),
    ("fe-empty", lambda: _fit([]), IA, r"^`values` must not be empty"),
    ("fe-no-repeats", lambda: _fit(np.ones((3, 0))), IA, r"^`values` must not be emp"),
    (
        "fe-longdouble",
        lambda: _fit(np.ones(3, dtype=np.longdouble)),
        IA,
        r"^`values` has extended precision dtype",
    ),
    ("fe-confidence", lambda: _fit(confidence=1.0), IA, r"^`confidence` must lie str"),
    ("fe-method", lambda: _fit(method="ols"), IA, r"^`method` must be one of 'theil-"),
    ("fe-statistic", lambda: _fit(statistic="x"), IA, r"^`statistic` must be one of"),
    ("fe-resamples", lambda: _fit(n_resamples=1), IA, r"^`n_resamples` must be >= 100"),
    (
        "fe-resamples-huge",
        lambda: _fit(np.ones((3, 2)), method="bootstrap", n_resamples=10**12),
        IA,
        r"^the 1000000000000 bootstrap resamples would need 6000000000000 entries",
    ),
    (
        "fe-bootstrap-1d",
        lambda: _fit(method="bootstrap"),
        IA,
        r"^`method` = 'bootstrap' resamples the repeats at each size",
    ),
    (
        "fe-seed",
        lambda: _fit(np.ones((3, 2)), method="bootstrap", seed=None),
        IA,
        r"^`seed` must be given",
    ),
    ("fe-expected", lambda: _fit(expected=3), IA, r"^`expected` must be a pair \(low"),
    ("fe-expected-3", lambda: _fit(expected=(1, 2, 3)), IA, r"^`expected` must be a"),
    ("fe-expected-nan", lambda: _fit(expected=(math.nan, 2)), IA, r"^`expected\[0\]`"),
    ("fe-expected-rev", lambda: _fit(expected=(2, 1)), IA, r"^`expected` must have lo"),
    ("fe-expected-str", lambda: _fit(expected="ab"), IA, r"^`expected\[0\]` must be a"),
    ("rs-sizes", lambda: _scale(sizes=[8, 16]), IA, r"^`sizes` must hold at least 3"),
    ("rs-d", lambda: _scale(d=0), IA, r"^`d` must be >= 1, got 0"),
    ("rs-features", lambda: _scale(num_features=0), IA, r"^`num_features` must be >="),
    (
        "rs-features-huge",
        lambda: _scale(num_features=10**12),
        IA,
        r"^the inputs at n = 32 would need 64000000000000 entries",
    ),
    (
        "rs-sizes-huge",
        lambda: _scale(sizes=[8, 16, 10**12]),
        IA,
        r"^the inputs at n = 1000000000000 would need",
    ),
    ("rs-chunk", lambda: _scale(chunk_size=0), IA, r"^`chunk_size` must be >= 1"),
    ("rs-repeats", lambda: _scale(repeats=0), IA, r"^`repeats` must be >= 1, got 0"),
    ("rs-statistic", lambda: _scale(statistic="x"), IA, r"^`statistic` must be one"),
    ("rs-confidence", lambda: _scale(confidence=2), IA, r"^`confidence` must lie"),
    ("rs-seed", lambda: _scale(seed=None), IA, r"^`seed` must be given"),
    ("rs-out", lambda: _scale(out=5), IA, r"^`out` must be a folder path, got int"),
    ("rs-out-file", lambda: _scale(out=HERE), IA, r"^`out` must be a folder, but"),
    ("rs-forms-str", lambda: _scale(forms="softmax"), IA, r"^`forms` must be a seque"),
    ("rs-forms-empty", lambda: _scale(forms=[]), IA, r"^`forms` must name at least"),
    ("rs-forms-x", lambda: _scale(forms=["x"]), IA, r"^`forms` must be one of 'soft"),
    ("rs-threads", lambda: _scale(threads=0), IA, r"^`threads` must be >= 1, got 0"),
    ("rs-clock", lambda: _scale(clock="x"), IA, r"^`clock` must be one of 'wall'"),
    ("rs-quick", lambda: _scale(quick="no"), IA, r"^`quick` must be True or False"),
    ("rs-progress", lambda: _scale(progress=5), IA, r"^`progress` must be callable"),
    ("pm-empty", lambda: _plot([]), IA, r"^`measurements` must hold at least one"),
    ("pm-int", lambda: _plot(5), IA, r"^`measurements` must be a sequence of Measu"),
    ("pm-str", lambda: _plot("m"), IA, r"^`measurements` must be a sequence of Measu"),
    (
        "pm-one",
        lambda: _plot(_measurement()),
        IA,
        r"^`measurements` must be a sequence of Measurement objects; pass one as \[m\]",
    ),
    ("pm-item", lambda: _plot(["a"]), IA, r"^`measurements\[0\]` must be a Measurem"),
    ("pm-path", lambda: _plot(path=5), IA, r"^`path` must be a file path, got int 5"),
    ("pm-path-dir", lambda: _plot(path=ROOT), IA, r"^`path` must be a file, but .* f"),
    (
        "pm-suffix",
        lambda: _plot(path="never-written.xyz"),
        IA,
        r"^`path` must end in a suffix matplotlib can write \(.*png.*\), got '\.xyz'",
    ),
    ("pm-title", lambda: _plot(title=5), IA, r"^`title` must be a string, got int 5"),
]


def _assert_attention(fn=lambda Q, K, V: V, **kw):
    return T.assert_attention_matches(fn, **kw)


STRATEGIES_TESTING_BAD = [
    ("fm-depth", lambda: kst.feature_maps(max_depth=0), IA, r"^`max_depth` must be >="),
    ("fm-depth-big", lambda: kst.feature_maps(max_depth=9), IA, r"^`max_depth` must"),
    ("fm-depth-str", lambda: kst.feature_maps(max_depth="3"), IA, r"^`max_depth` mu"),
    ("fm-features", lambda: kst.feature_maps(max_features=0), IA, r"^`max_features`"),
    ("fm-at", lambda: kst.feature_maps(feature_dim_at=0), IA, r"^`feature_dim_at`"),
    (
        "fm-at-float",
        lambda: kst.feature_maps(feature_dim_at=1.5),
        IA,
        r"^`feature_dim_at` must be an integer",
    ),
    ("aam-fn", lambda: _assert_attention(5), IA, r"^`fn` must be callable, got int 5"),
    ("aam-causal", lambda: _assert_attention(causal="yes"), IA, r"^`causal` must be"),
    ("aam-n", lambda: _assert_attention(n=1), IA, r"^`n` must be >= 2"),
    ("aam-d", lambda: _assert_attention(d=0), IA, r"^`d` must be >= 1, got 0"),
    ("aam-seed", lambda: _assert_attention(seed=None), IA, r"^`seed` must be given"),
    ("aam-kernel", lambda: _assert_attention(kernel="exp"), IA, r"^`kernel` must be"),
    ("ak-kernel", lambda: T.assert_kernel(5, X), IA, r"^`kernel` must be a kernel"),
    (
        "ak-X",
        lambda: T.assert_kernel(Linear(), np.array([[np.nan]])),
        IA,
        r"^`X` must be finite",
    ),
    ("afm-phi", lambda: T.assert_feature_map(5, X), IA, r"^`phi` must be callable"),
    (
        "afm-X",
        lambda: T.assert_feature_map(Linear().features(), np.ones(2)),
        IA,
        r"^`X` must be a 2-d array",
    ),
    (
        "au-trials",
        lambda: T.assert_unbiased(
            PositiveRandomFeatures.sampler(2, 4), Exponential(), X, trials=0, seed=0
        ),
        IA,
        r"^`trials` must be >= ",
    ),
    (
        "au-X",
        lambda: T.assert_unbiased(
            PositiveRandomFeatures.sampler(2, 4), Exponential(), np.ones((2, 3)), trials=10, seed=0
        ),
        IA,
        r"^`X` must have d = 2",
    ),
]

DISTRIBUTED_BAD = [
    ("de-workers", lambda: _enter(D.dask_executor(workers=0)), IA, r"^`workers` must"),
    ("de-workers-neg", lambda: _enter(D.dask_executor(workers=-1)), IA, r"^`workers`"),
    (
        "de-workers-float",
        lambda: _enter(D.dask_executor(workers=1.5)),
        IA,
        r"^`workers` must be an integer, got float 1.5",
    ),
    (
        "de-threads",
        lambda: _enter(D.dask_executor(threads_per_worker=0)),
        IA,
        r"^`threads_per_worker` must be >= 1, got 0",
    ),
    (
        "de-retries",
        lambda: _enter(D.dask_executor(retries=-1)),
        IA,
        r"^`retries` must be >= 0, got -1",
    ),
    ("de-timeout", lambda: _enter(D.dask_executor(timeout=0)), IA, r"^`timeout` must"),
    (
        "de-timeout-nan",
        lambda: _enter(D.dask_executor(timeout=math.nan)),
        IA,
        r"^`timeout` must be finite, got nan",
    ),
    (
        "de-scheduler",
        lambda: _enter(D.dask_executor(scheduler=5)),
        IA,
        r"^`scheduler` must be a scheduler address",
    ),
    (
        "de-scheduler-blank",
        lambda: _enter(D.dask_executor(scheduler=" ")),
        IA,
        r"^`scheduler` must be a scheduler address such as 'tcp://10.0.0.5:8786', got str ' '",
    ),
    (
        "de-both",
        lambda: _enter(D.dask_executor(scheduler="tcp://127.0.0.1:1", workers=2)),
        IA,
        r"^`workers` = 2 starts a local cluster, but `scheduler` = 'tcp://127.0.0.1:1' was given",
    ),
    ("ss-zero", lambda: D.suggested_shards(None, 0), IA, r"^`per_thread` must be >="),
    ("ss-float", lambda: D.suggested_shards(None, 1.5), IA, r"^`per_thread` must be"),
    ("ss-str", lambda: D.suggested_shards(None, "4"), IA, r"^`per_thread` must be an"),
]


def _runner_cases(name, run):
    """Rows shared by ``run_claims`` and ``run_essay``.

    All are refused before any check runs, except the raising ``on_result``,
    which is called after the quickest claim (C7 at the quick level).
    """
    return [
        (f"{name}-level", lambda: run(["C7"], "x"), IA, r"^`level` must be one of 'quick'"),
        (
            f"{name}-str",
            lambda: run("C7", "quick"),
            IA,
            r"^`claim_ids` must be a list of claim ids such as \['C1', 'C5'\], got str 'C7'",
        ),
        (f"{name}-int", lambda: run(5, "quick"), IA, r"^`claim_ids` must be a list of claim"),
        (f"{name}-empty", lambda: run([], "quick"), IA, r"^`claim_ids` must name at least one"),
        (f"{name}-item", lambda: run([5], "quick"), IA, r"^`claim_ids\[0\]` must be a string"),
        (
            f"{name}-unknown",
            lambda: run(["C7", "C99"], "quick"),
            IA,
            r"^`claim_ids\[1\]` must be one of C1, .*; got 'C99'",
        ),
        (
            f"{name}-on-result",
            lambda: run(["C7"], "quick", on_result=5),
            IA,
            r"^`on_result` must be callable, got int 5",
        ),
        (
            f"{name}-on-result-raises",
            lambda: run(["C7"], "quick", on_result=_boom),
            IA,
            r"^`on_result` raised ZeroDivisionError: boom",
        ),
        (
            f"{name}-executor",
            lambda: run(["C7"], "quick", executor=object()),
            IA,
            r"^`executor` must be a concurrent\.futures\.Executor",
        ),
    ]


EMPTY_REPORT = C.EssayReport(results=(), level="quick", duration=0.0)

CLAIMS_BAD = [
    ("gc-int", lambda: C.get_claim(5), IA, r"^`claim_id` must be a string like 'C5'"),
    ("gc-none", lambda: C.get_claim(None), IA, r"^`claim_id` must be a string like"),
    ("gc-unknown", lambda: C.get_claim("C99"), IA, r"^`claim_id` must be one of C1, "),
    ("gc-empty", lambda: C.get_claim(""), IA, r"^`claim_id` must be one of C1, C2"),
    ("gc-level", lambda: C.get_claim("C7").check("x"), IA, r"^`level` must be one of"),
]

ESSAY_BAD = [
    (
        "re-item-with-stream",
        lambda: C.run_essay([5], "quick", stream=io.StringIO()),
        IA,
        r"^`claim_ids\[0\]` must be a string like 'C5', got 5",
    ),
    (
        "re-stream",
        lambda: C.run_essay(["C7"], "quick", stream=object()),
        IA,
        r"^`stream` must be a text stream \(with write\), got object",
    ),
    (
        "ec-str",
        lambda: C.exit_code_for("verified"),
        IA,
        r"^`verdicts` must be a list of outcomes \(verified, refuted, inconclusive\), "
        r"got str 'verified'",
    ),
    ("ec-int", lambda: C.exit_code_for(5), IA, r"^`verdicts` must be a list of outcomes"),
    (
        "ec-unknown",
        lambda: C.exit_code_for(["verified", "bogus"]),
        IA,
        r"^`verdicts\[1\]` must be an Outcome or one of 'verified', 'refuted', "
        r"'inconclusive'; got 'bogus'",
    ),
    ("ec-none", lambda: C.exit_code_for([None]), IA, r"^`verdicts\[0\]` must be an Outcome"),
    ("ec-case", lambda: C.exit_code_for(["VERIFIED"]), IA, r"^`verdicts\[0\]` must"),
    ("wr-report", lambda: C.write_report(5, "never"), IA, r"^`report` must be an Essa"),
    (
        "wr-out-type",
        lambda: C.write_report(EMPTY_REPORT, 5),
        IA,
        r"^`out_dir` must be a folder path, got int 5",
    ),
    (
        "wr-out-file",
        lambda: C.write_report(EMPTY_REPORT, HERE),
        IA,
        r"^`out_dir` must be a folder, but .* is a file",
    ),
]

CLAIMS_BAD += _runner_cases("rc", C.run_claims) + _runner_cases("re", C.run_essay) + ESSAY_BAD

BAD_CALLS = KERNEL_NODE_BAD + SCALING_BAD + STRATEGIES_TESTING_BAD + DISTRIBUTED_BAD + CLAIMS_BAD


@pytest.mark.parametrize(
    "call, error, message", [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS]
)
def test_bad_input_table(call, error, message):
    """Each row raises the expected clean error, its message read from the start.

    NumPy's RuntimeWarnings are errors here: none may leak before the clean error.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(error) as info:
            call()
    assert re.search(message, str(info.value)), str(info.value)
    assert type(info.value) in (InvalidArgument, InfiniteFeatureSpace)


def test_table_ids_are_unique():
    ids = [c[0] for c in BAD_CALLS]
    assert len(ids) == len(set(ids))


# ---------------------------------------------------------------------------
# Accepted inputs: read-only arrays are not written, float16 gives the float64 answer
# ---------------------------------------------------------------------------


def test_fit_exponent_reads_readonly_float16_and_list_inputs_without_writing():
    """Read-only, float16 and list inputs give exactly the float64 fit; no input is written."""
    values = _readonly([[1.0, 1.5], [2.0, 2.5], [4.5, 4.0]])
    sizes = np.array(SZ)
    sizes.setflags(write=False)
    expected = S.fit_exponent(list(SZ), values.copy(), method="bootstrap", n_resamples=200)
    got = S.fit_exponent(sizes, values, method="bootstrap", n_resamples=200)
    assert got.to_json() == expected.to_json()
    assert np.array_equal(values, [[1.0, 1.5], [2.0, 2.5], [4.5, 4.0]])
    half = np.array([1.0, 2.0, 4.0], dtype=np.float16)  # exact in float16
    assert S.fit_exponent(SZ, half).to_json() == S.fit_exponent(SZ, [1.0, 2.0, 4.0]).to_json()


def test_measure_passes_readonly_inputs_through_unwritten():
    """measure hands ``make_input``'s arrays to ``fn`` as they are; read-only ones stay intact."""
    seen = []

    def fn(a):
        seen.append(a.flags.writeable)
        return a.sum()

    inputs = {n: _readonly(np.arange(n)) for n in SZ}
    m = S.measure(fn, SZ, make_input=inputs.__getitem__, repeats=1, warmup=0, memory=False)
    assert m.sizes == SZ and not any(seen)
    assert all(np.array_equal(inputs[n], np.arange(n)) for n in SZ)


def test_kernelcheck_errors_raised_inside_user_callables_pass_through():
    """A kernelcheck error inside ``fn`` or ``cost`` is not re-wrapped as a user failure."""
    with pytest.raises(InvalidArgument, match=r"^`X` must be finite"):
        _measure(fn=lambda a: Linear()(np.full((1, 1), np.nan)))
    with pytest.raises(InvalidArgument, match=r"^`m` must be >= 0"):
        _measure(cost=lambda n: Power(Linear(), -1))


def test_assert_attention_matches_reports_a_failing_layer_as_an_assertion():
    """The pytest twin turns a layer that raises or returns NaN into an AssertionError naming it.

    (verify.attention reports such a layer as a failed case rather than bad input.)
    """
    with pytest.raises(AssertionError, match=r"fn raised ZeroDivisionError: boom"):
        T.assert_attention_matches(_boom, n=4, d=2)
    with pytest.raises(AssertionError, match=r"^refuted: case 'random' .*non-finite"):
        T.assert_attention_matches(lambda Q, K, V: V * np.nan, n=4, d=2)


def test_run_essay_with_a_stream_prints_canonical_ids():
    """Lower-case ids with spaces are accepted and printed canonically (checked up front)."""
    out = io.StringIO()
    report = C.run_essay([" c7 "], "quick", stream=out)
    assert [r.claim for r in report.results] == ["C7"]
    assert "C7" in out.getvalue() and " c7 " not in out.getvalue()


# ---------------------------------------------------------------------------
# Every public callable has a bad-input table
# ---------------------------------------------------------------------------

#: Public names with no bad-input table, each with the reason.
EXEMPT = {
    "kernelcheck.kernels.Kernel": "abstract base; every concrete node has rows",
    "kernelcheck.features.FeatureMap": "abstract base users subclass; verify.feature_map has rows",
    "kernelcheck.psd.PSDResult": "result built by check_psd",
    "kernelcheck.psd.Verdict": "enum of PSD verdicts",
    "kernelcheck.psd.MercerFeatures": "result built by mercer_features",
    "kernelcheck.attention.AttentionOutput": "result built by the attention forms",
    "kernelcheck.attention.AttentionCost": "result built by cost_model",
    "kernelcheck.attention.Form": "registry entry kernelcheck builds; get_form has rows",
    "kernelcheck.attention.Family": "registry entry kernelcheck builds; get_family has rows",
    "kernelcheck.attention.Recurrence": (
        "pair built by linear_recurrence and gated_recurrence, whose parts have rows"
    ),
    "kernelcheck.strategies.register_profiles": "takes no arguments",
    "kernelcheck.strategies.AttentionInputs": "record drawn by attention_inputs",
    "kernelcheck.attention.VJP": "result built by the *_vjp functions",
    "kernelcheck.attention.GatedVJP": "result built by gated_vjp and its bound",
    "kernelcheck.attention.ChannelVJP": "result built by channel_gated_vjp and its bound",
    "kernelcheck.claims.Claim": "registry entry kernelcheck builds; Claim.check has a row",
    "kernelcheck.claims.ClaimResult": "result built by Claim.check",
    "kernelcheck.claims.ClaimVerdict": "enum of claim verdicts",
    "kernelcheck.claims.EssayReport": "result built by run_essay",
    "kernelcheck.claims.registry": "takes no arguments",
    "kernelcheck.errors.InvalidArgument": "exception",
    "kernelcheck.errors.InfiniteFeatureSpace": "exception",
    "kernelcheck.errors.BadNormalizer": "exception",
    "kernelcheck.errors.NumericalFailure": "exception",
    "kernelcheck.errors.Inconclusive": "exception",
    "kernelcheck.scaling.Measurement": "result built by measure; plot_measurements checks its type",
    "kernelcheck.scaling.ExponentFit": "result built by fit_exponent",
    "kernelcheck.scaling.AcceptedRange": "result built by accepted_range",
    "kernelcheck.scaling.FormScaling": "result built by run_scaling",
    "kernelcheck.scaling.ScalingReport": "result built by run_scaling",
    "kernelcheck.verify.KernelReport": "report built by verify.kernel",
    "kernelcheck.verify.FeatureMapReport": "report built by verify.feature_map",
    "kernelcheck.verify.UnbiasedReport": "report built by verify.unbiased",
    "kernelcheck.verify.PairResult": "part of UnbiasedReport",
    "kernelcheck.verify.SweepPoint": "part of UnbiasedReport",
    "kernelcheck.verify.RatioBiasResult": "result built by verify.ratio_bias",
    "kernelcheck.verify.RandomFeatureAttentionReport": "report of verify.random_feature_attention",
    "kernelcheck.verify.AttentionReport": "report built by verify.attention",
    "kernelcheck.verify.AttentionCase": "part of AttentionReport",
}

#: Public modules without a table of their own: the command line and the pytest plugin.
NOT_TABLED_MODULES = {"cli", "pytest_plugin", "__main__"}
_MISSING = object()


def _public_modules() -> list[types.ModuleType]:
    names = ["kernelcheck"] + [
        f"kernelcheck.{p.stem}"
        for p in sorted((ROOT / "kernelcheck").glob("*.py"))
        if not p.stem.startswith("_") and p.stem not in NOT_TABLED_MODULES
    ]
    return [importlib.import_module(n) for n in names]


def _public_callables(modules) -> dict[int, tuple[object, list[str]]]:
    """``{id(obj): (obj, public dotted names)}`` of every function and class in an ``__all__``."""
    found: dict[int, tuple[object, list[str]]] = {}
    for module in modules:
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isfunction(obj) or inspect.isclass(obj):
                found.setdefault(id(obj), (obj, []))[1].append(f"{module.__name__}.{name}")
    return found


def _is_parametrize(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "parametrize"
    )


def _resolve(node: ast.expr, env: dict) -> object:
    """The object a Name or dotted Attribute denotes through the file's imports."""
    if isinstance(node, ast.Name):
        return env.get(node.id, _MISSING)
    if isinstance(node, ast.Attribute):
        base = _resolve(node.value, env)
        return _MISSING if base is _MISSING else getattr(base, node.attr, _MISSING)
    return _MISSING


def _tabled_objects(source: str) -> set[int]:
    """Ids of the kernelcheck objects named inside the bad-input tables of one test file.

    A table is a module-level assignment whose target name contains ``BAD``, or
    the argument values of a ``pytest.mark.parametrize`` decorator.  Names are
    resolved through the file's ``kernelcheck`` imports (``A.softmax`` with
    ``from kernelcheck import attention as A``), and module-level helpers a
    table refers to (row builders, example lists) are followed.
    """
    tree = ast.parse(source)
    catalogued: set[int] = set()
    env: dict[str, object] = {}
    helpers: dict[str, ast.AST] = {}
    tables: list[ast.AST] = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kernelcheck"):
            module = importlib.import_module(node.module)
            for alias in node.names:
                env[alias.asname or alias.name] = getattr(module, alias.name, _MISSING)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("kernelcheck"):
                    top = alias.asname or alias.name.split(".")[0]
                    target = alias.name if alias.asname else top
                    env[top] = importlib.import_module(target)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    helpers.setdefault(target.id, node.value)
                    if "BAD" in target.id:
                        tables.append(node.value)
        elif isinstance(node, ast.FunctionDef):
            helpers[node.name] = node
            for dec in node.decorator_list:
                if _is_parametrize(dec):
                    assert isinstance(dec, ast.Call)
                    tables.extend(dec.args[1:])
                    tables.extend(k.value for k in dec.keywords if k.arg == "argvalues")
            for arg in node.args.args:
                catalogued |= _catalogue_objects(arg.arg)
    found: set[int] = set(catalogued)
    followed: set[str] = set()
    todo = list(tables)
    while todo:
        for sub in ast.walk(todo.pop()):
            if isinstance(sub, (ast.Name, ast.Attribute)):
                obj = _resolve(sub, env)
                if obj is not _MISSING:
                    found.add(id(obj))
            if isinstance(sub, ast.Name) and sub.id in helpers and sub.id not in followed:
                followed.add(sub.id)
                todo.append(helpers[sub.id])
    return found


def _catalogue_objects(argument: str) -> set[int]:
    """Ids of the kernelcheck classes a catalogue argument (tests/conftest.py) runs over.

    A test taking ``random_feature_map`` is parametrized over the random feature classes
    of tests/catalog.py, as if they were listed in its ``parametrize``; a kernel (or the
    kernel of an exact map) contributes the classes of its nodes.
    """
    found: set[int] = set()
    for param in CATALOGUE_ARGUMENTS.get(argument, []):
        (value,) = param.values
        todo = [value[0] if isinstance(value, tuple) else value]
        while todo:
            obj = todo.pop()
            if inspect.isclass(obj):
                found.add(id(obj))
                continue
            found.add(id(type(obj)))
            todo += [getattr(obj, a) for a in ("left", "right", "kernel") if hasattr(obj, a)]
    return found


def _untabled(modules, test_files) -> list[str]:
    tabled: set[int] = set()
    for path in test_files:
        tabled |= _tabled_objects(path.read_text(encoding="utf-8"))
    return sorted(
        names[0]
        for key, (_, names) in _public_callables(modules).items()
        if key not in tabled and not any(n in EXEMPT for n in names)
    )


RELIABILITY_FILES = sorted((ROOT / "tests").rglob("test_reliability*.py"))


def test_every_public_callable_has_a_bad_input_table():
    """Every public function and user-built class appears in a bad-input table, or in EXEMPT."""
    assert HERE in RELIABILITY_FILES
    missing = _untabled(_public_modules(), RELIABILITY_FILES)
    assert not missing, f"public callables without a bad-input table (or EXEMPT entry): {missing}"


def test_exemptions_name_current_public_callables():
    """A stale EXEMPT entry (renamed or removed name) is an error, not a silent pass."""
    public = {n for _, names in _public_callables(_public_modules()).values() for n in names}
    assert sorted(set(EXEMPT) - public) == []


def test_the_coverage_check_fails_for_a_public_function_without_a_table():
    """A new public function with no row is reported; adding a row makes it pass."""

    def brand_new(x):
        """A public function nobody has tabled yet."""

    module = types.ModuleType("kernelcheck.brand_new_module")
    module.__all__ = ["brand_new"]
    module.brand_new = brand_new  # type: ignore[attr-defined]
    assert _untabled([module], RELIABILITY_FILES) == ["kernelcheck.brand_new_module.brand_new"]

    tabled = _tabled_objects(
        "from kernelcheck.kernels import Sum\n"
        "import kernelcheck.scaling as S\n"
        "NEW_BAD = [(lambda: Sum(1, 'a'), '`right`'), (lambda: S.measure(5), '`fn`')]\n"
    )
    assert id(Sum) in tabled and id(S.measure) in tabled and id(S.run_scaling) not in tabled
