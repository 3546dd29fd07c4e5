"""Calls of a user's callable: the one wrapper of user code.

:func:`call_user` hands the callable copies of the caller's arrays, bounds
the call by the enclosing deadline (:mod:`~kernelcheck._src.core.deadline`),
turns the callable's own exceptions into
:class:`~kernelcheck.errors.InvalidArgument` naming the call, and refuses a
result that is not real numbers (:func:`not_real`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from kernelcheck._src.core.deadline import run_user
from kernelcheck._src.core.validate import describe
from kernelcheck.errors import (
    BadNormalizer,
    InfiniteFeatureSpace,
    InvalidArgument,
    NumericalFailure,
)

__all__ = ["OWN_ERRORS", "call_user", "not_real"]


#: kernelcheck's own errors: raised inside a user's callable (which may call
#: kernelcheck), they pass through :func:`call_user` unchanged.
OWN_ERRORS = (InvalidArgument, InfiniteFeatureSpace, NumericalFailure, BadNormalizer)


def call_user(fn: Callable, label: str, *args: Any, **kwargs: Any) -> Any:
    """Call a user's callable ``fn(*args, **kwargs)``: the one wrapper of user code.

    * NumPy array arguments are passed as copies, so a callable that writes
      into its argument never changes the caller's data (nor the verdict);
    * the call waits at most until the deadline of the enclosing
      :func:`~kernelcheck._src.core.deadline.user_deadline` (see
      :func:`~kernelcheck._src.core.deadline.run_user`);
    * kernelcheck's own errors (:data:`OWN_ERRORS`) pass through unchanged;
    * any other exception becomes :class:`InvalidArgument` whose message is
      ``f"{label} raised {type}: {message}"``, chained to the original.
      ``label`` names the argument and the call the way the caller knows it,
      e.g. ``"`phi` on `X`"`` or ``"`fn` at n = 64"``;
    * a result that is numbers but not real numbers -- a complex, object,
      string or bytes array (NumPy, or a tensor of a complex dtype), a
      complex or string scalar, or such an item of a returned tuple or list
      -- is refused with :class:`InvalidArgument` ``f"{label} returned ..."``
      (NumPy would drop an imaginary part with only a warning, and read an
      object array entry by entry).  Everything else is returned as it is:
      callers read arrays with :func:`~kernelcheck._src.core.validate.as_array`
      (or :func:`~kernelcheck._src.core.validate.as_real`), which
      also refuses NaN and Inf, naming the call.

    Parameters
    ----------
    fn : callable
        The user's callable.
    label : str
        How the messages name the call.
    *args : object
        Its positional arguments (NumPy arrays are copied).
    **kwargs : object
        Its keyword arguments (passed as they are).

    Returns
    -------
    object
        What ``fn`` returned.
    """
    args = tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)
    try:
        out = run_user(fn, label, *args, **kwargs)
    except OWN_ERRORS:
        raise
    except Exception as exc:
        raise InvalidArgument(f"{label} raised {type(exc).__name__}: {exc}") from exc
    for item in out if isinstance(out, (tuple, list)) else (out,):
        if not_real(item):
            raise InvalidArgument(
                f"{label} returned {describe(item)}; expected real numbers (take the real "
                "part, or convert to float, yourself)"
            )
    return out


def not_real(value: Any) -> bool:
    """A complex, object, string or bytes array or scalar (a NumPy one, a Python one, a tensor).

    Parameters
    ----------
    value : object
        A user's result.

    Returns
    -------
    bool
        Whether it is numbers but not real numbers.
    """
    if isinstance(value, (complex, str, bytes)):
        return True
    if isinstance(value, (np.ndarray, np.generic)):
        return _non_real_dtype(value.dtype)
    is_complex = getattr(value, "is_complex", None)  # torch tensors
    if callable(is_complex) and hasattr(value, "dtype"):
        try:
            return bool(is_complex())
        except Exception:  # not a tensor's is_complex
            return False
    dtype = getattr(value, "dtype", None)  # JAX and other array types
    if dtype is not None and hasattr(value, "shape"):
        try:
            return _non_real_dtype(np.dtype(dtype))
        except TypeError:
            return False
    return False


def _non_real_dtype(dt: np.dtype) -> bool:
    """Complex, object, string, bytes or void; a registered number type (bfloat16) is real.

    ``ml_dtypes``' bfloat16 and float8 types (JAX's) are user-defined NumPy
    dtypes of kind ``"V"``, as are raw void and structured dtypes; only the
    latter are not numbers.
    """
    if dt.kind == "V":
        return dt.isbuiltin != 2 or dt.names is not None
    return dt.kind in "cOSU"
