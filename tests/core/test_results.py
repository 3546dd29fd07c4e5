"""Results serialise to strict JSON (kernelcheck._src.core.results)."""

from __future__ import annotations

import enum
import json
import math
from dataclasses import dataclass

import numpy as np

from kernelcheck._src.core.results import ResultMixin, to_jsonable
from kernelcheck._src.core.rounding import Tolerance


class Color(enum.Enum):
    RED = "red"


@dataclass(frozen=True)
class _Result(ResultMixin):
    value: float
    array: np.ndarray
    color: Color
    tol: Tolerance


def test_results_are_strict_json():
    r = _Result(float("nan"), np.array([1.0, np.inf]), Color.RED, Tolerance(1e-3, "model"))
    d = json.loads(r.to_json(allow_nan=False))
    assert d == {
        "value": "nan",
        "array": [1.0, "inf"],
        "color": "red",
        "tol": {"value": 1e-3, "source": "model", "kind": "absolute"},
    }
    assert to_jsonable(np.int64(3)) == 3 and to_jsonable((1, -math.inf)) == [1, "-inf"]
