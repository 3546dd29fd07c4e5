"""Helpers shared by the input tests: refusal rows, their check, read-only arrays.

``point_set_rows(name, call)`` gives ``(id, call, error, message regex)`` rows
for a function of one point set ``X`` of shape ``(n, d)``: a 1-d or 3-d array,
an empty one, NaN, Inf, complex, object, string and ragged input, each refused
with ``InvalidArgument`` whose message opens with `` `X` `` and describes the
value.  The kernels' table and the feature-map verifier's table both use it.

``readonly(a)`` is a float64 copy of ``a`` that cannot be written: a function that
wrote into its input would raise.

``assert_refused(call, error, message)`` runs one row of a table whose rows
must be refused by name: the call raises ``error`` itself (``InvalidArgument``
or its subclass ``InfiniteFeatureSpace``, not any other subclass of
``ValueError``), its message matches ``message`` (a regex, usually anchored
with ``^`` to the argument in backticks), and no NumPy ``RuntimeWarning`` leaks
before it.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

from kernelcheck.errors import InfiniteFeatureSpace, InvalidArgument

#: A valid point set, the base of the complex and object rows.
POINTS = np.random.default_rng(3).normal(size=(4, 2))


def point_set_rows(name, call):
    return [
        (
            f"{name}-1d",
            lambda: call(np.ones(3)),
            InvalidArgument,
            r"^`X` must be a 2-d array of shape \(n, d\), got array of shape \(3,\) and dtype "
            r"float64 \(a single point x is passed as x\[None, :\]",
        ),
        (
            f"{name}-3d",
            lambda: call(np.ones((2, 2, 2))),
            InvalidArgument,
            r"^`X` must be a 2-d array of shape \(n, d\), got array of shape \(2, 2, 2\)",
        ),
        (
            f"{name}-empty",
            lambda: call(np.ones((0, 2))),
            InvalidArgument,
            r"^`X` must not be empty, got array of shape \(0, 2\)",
        ),
        (
            f"{name}-nan",
            lambda: call(np.array([[1.0, np.nan]])),
            InvalidArgument,
            r"^`X` must be finite, but 1 entry is NaN or Inf \(first at index \(0, 1\)",
        ),
        (
            f"{name}-inf",
            lambda: call(np.array([[np.inf], [-np.inf]])),
            InvalidArgument,
            r"^`X` must be finite, but 2 entries are NaN or Inf \(first at index \(0, 0\)",
        ),
        (
            f"{name}-complex",
            lambda: call(POINTS + 0j),
            InvalidArgument,
            r"^`X` must be real, got complex",
        ),
        (
            f"{name}-object",
            lambda: call(POINTS.astype(object)),
            InvalidArgument,
            r"^`X` must be a real numeric array, got array of shape \(4, 2\) and dtype object",
        ),
        (
            f"{name}-str",
            lambda: call("points"),
            InvalidArgument,
            r"^`X` must be a numeric array, got str 'points'",
        ),
        (
            f"{name}-ragged",
            lambda: call([[1.0], [1.0, 2.0]]),
            InvalidArgument,
            r"^`X` must be a numeric array, got list",
        ),
    ]


def assert_refused(call, error, message):
    """Run ``call`` and require the clean refusal ``error`` with ``message`` (a regex)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(error) as info:
            call()
    assert re.search(message, str(info.value)), str(info.value)
    assert type(info.value) in (InvalidArgument, InfiniteFeatureSpace)


def readonly(a) -> np.ndarray:
    """A float64 copy of ``a`` that raises when written into."""
    a = np.array(a, dtype=np.float64)
    a.setflags(write=False)
    return a
