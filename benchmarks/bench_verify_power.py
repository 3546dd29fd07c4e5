"""A smoke test of benchmarks/verify_power.py: one tiny cell of each measurement.

The measurement itself (minutes to hours) is run by hand; here each piece
runs once on a few tokens: the bisection, the TF32 emulation of the zoo
against kernelcheck's rounding, one false-alarm cell and a bug of the power search.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import verify_power as vp  # noqa: E402
import zoo  # noqa: E402

from kernelcheck._src.verify.adapters import round_to  # noqa: E402


def test_smallest_caught_bisects_to_the_threshold():
    r, note = vp.smallest_caught(lambda r: r >= 3e-4)
    assert note == "" and 3e-4 <= r <= 3e-4 * 1.25
    assert math.isnan(vp.smallest_caught(lambda r: False)[0])
    assert vp.smallest_caught(lambda r: True) == (1e-8, "<= 1e-08")


def test_tf32_emulation_rounds_as_the_error_model_does():
    x = torch.randn(4096) * 10.0 ** torch.randint(-20, 20, (4096,))
    assert np.array_equal(zoo.to_tf32(x).double().numpy(), round_to(x.double().numpy(), "tf32"))


def test_one_false_alarm_cell_and_one_bug():
    vp.cache_references()
    fn, kw = zoo.flash(), {"causal": True}
    cell = vp.false_alarm_cell("flash", fn, kw, "torch", "float16", 16, range(1))
    assert cell["kernelcheck"] == 0 and cell["fla ratio"]["O"] == 0
    assert vp.kernelcheck_passes(vp.buggy("softmax", "O", 0.0), "softmax", "float16", 16, False)
    bug = vp.buggy("softmax", "O", 1e-2)
    assert not vp.kernelcheck_passes(bug, "softmax", "float16", 16, False)
