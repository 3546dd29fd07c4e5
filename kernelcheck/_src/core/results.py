"""Common behaviour of result objects: JSON-ready ``to_dict``.

Results are frozen dataclasses with an ``outcome`` property in the one
vocabulary of :mod:`kernelcheck._src.core.outcome`.  ``to_dict`` turns NumPy arrays into nested
lists, enums into their values, non-finite floats into the strings ``"nan"``,
``"inf"``, ``"-inf"`` (strict JSON has no NaN), and nested results into dicts.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from typing import Any

import numpy as np

__all__ = ["to_jsonable", "ResultMixin"]


def to_jsonable(value: Any) -> Any:
    """Convert ``value`` into plain JSON types (see module docstring)."""
    if hasattr(value, "to_dict") and callable(value.to_dict) and not isinstance(value, type):
        return value.to_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, np.ndarray):
        return to_jsonable(value.tolist())
    if isinstance(value, (np.generic,)):
        return to_jsonable(value.item())
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return repr(value)


class ResultMixin:
    """Mixin for frozen-dataclass results: ``to_dict()`` and ``to_json()``."""

    def to_dict(self) -> dict:
        """A JSON-ready dict of every field (arrays as lists), and the ``outcome`` if any."""
        out = {f.name: to_jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        outcome = getattr(type(self), "outcome", None)
        if isinstance(outcome, property) and "outcome" not in out:
            out["outcome"] = to_jsonable(self.outcome)  # type: ignore[attr-defined]
        return out

    def to_json(self, **kwargs) -> str:
        """``json.dumps(self.to_dict())``; keyword arguments go to :func:`json.dumps`."""
        return json.dumps(self.to_dict(), **kwargs)
