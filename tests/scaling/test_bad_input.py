"""Bad input to kernelcheck.scaling is refused by name, before any timing (claims C2, C3).

``geometric_sizes``, ``measure``, ``fit_exponent``, ``run_scaling`` and
``plot_measurements``: each row raises ``InvalidArgument`` whose message opens
with the argument in backticks, or names the size an intermediate would need
(:func:`tests.inputs.assert_refused`).  A user callable that raises becomes
``InvalidArgument`` naming it; a kernelcheck error raised inside one passes
through as it is.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import numpy as np
import pytest

from kernelcheck import scaling as S
from kernelcheck.errors import InvalidArgument
from kernelcheck.kernels import (
    Linear,
    Power,
)
from tests.inputs import assert_refused

IA = InvalidArgument  # the error most rows expect
HERE = Path(__file__).resolve()
ROOT = HERE.parents[2]
SZ = (8, 16, 32)


def _boom(*args):
    raise ZeroDivisionError("boom")


def _ones(n):
    return np.ones(n)


@functools.cache
def _measurement():
    """A real Measurement of three tiny sizes (no memory pass, one repeat)."""
    return S.measure(np.sum, SZ, make_input=_ones, repeats=1, warmup=0, min_time=0, memory=False)


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


def test_kernelcheck_errors_raised_inside_user_callables_pass_through():
    """A kernelcheck error inside ``fn`` or ``cost`` is not re-wrapped as a user failure."""
    with pytest.raises(InvalidArgument, match=r"^`X` must be finite"):
        _measure(fn=lambda a: Linear()(np.full((1, 1), np.nan)))
    with pytest.raises(InvalidArgument, match=r"^`m` must be >= 0"):
        _measure(cost=lambda n: Power(Linear(), -1))


@pytest.mark.parametrize(
    "call, error, message", [c[1:] for c in SCALING_BAD], ids=[c[0] for c in SCALING_BAD]
)
def test_bad_input_table(call, error, message):
    """Each row raises the expected clean error, its message read from the start."""
    assert_refused(call, error, message)
