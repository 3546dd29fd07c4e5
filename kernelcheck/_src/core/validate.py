"""Checks of argument values: arrays, numbers, flags, choices and dtypes.

Each public function validates its input first, through these helpers, so that
bad input raises :class:`~kernelcheck.errors.InvalidArgument` naming the
argument, describing the value and saying what was expected.  Conventions:

* Arrays: any array-like (lists, NumPy arrays, CPU PyTorch / JAX arrays via
  ``np.asarray``; tensors that require grad are detached first).  Booleans and
  integers become float64; float16 becomes float64; float32 stays float32
  (the caller asked for it); float64 stays.  Complex, object, string, datetime
  and extended-precision dtypes are refused.
* NaN or Inf anywhere is an error, never a verdict.
* Results never alias the caller's memory when the function may write: the
  helpers return read-only views when ``writeable=False`` is asked for.

The other checks of the core have a module each: the memory an intermediate
may take (:mod:`~kernelcheck._src.core.memory`), seeds
(:mod:`~kernelcheck._src.core.seeds`), calls of user code
(:mod:`~kernelcheck._src.core.calls`) and their time limits
(:mod:`~kernelcheck._src.core.deadline`), file paths
(:mod:`~kernelcheck._src.core.files`) and scheduler addresses
(:mod:`~kernelcheck._src.core.addresses`).
"""

from __future__ import annotations

import math
import numbers
import operator
from typing import Any

import numpy as np

from kernelcheck._src.core.memory import check_size
from kernelcheck.errors import InvalidArgument, NumericalFailure

__all__ = [
    "describe",
    "to_numpy",
    "as_array",
    "all_finite",
    "as_points",
    "as_square_matrix",
    "SQUARE_WORKING_COPIES",
    "check_finite",
    "check_computed",
    "as_int",
    "as_real",
    "as_probability",
    "check_choice",
    "check_callable",
    "as_executor",
    "as_bool",
    "as_float_dtype",
    "as_int_tuple",
    "result_dtype",
]


def describe(value: Any) -> str:
    """A short description of ``value`` for error messages (type, shape, dtype).

    Parameters
    ----------
    value : object
        Anything a caller passed.

    Returns
    -------
    str
        ``"array of shape (2, 3) and dtype float64"``, ``"str 'abc'"``, ...
    """
    if isinstance(value, np.ndarray):
        return f"array of shape {value.shape} and dtype {value.dtype}"
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        return f"{type(value).__name__} of shape {tuple(shape)} and dtype {dtype}"
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


def to_numpy(value: Any, name: str) -> np.ndarray:
    """``value`` as a NumPy array: the one converter of arrays and tensors.

    NumPy arrays are returned as they are; a PyTorch tensor is detached and
    moved to host memory; anything else goes through :func:`numpy.asarray`.
    bfloat16 values (a PyTorch tensor, or a JAX or ml_dtypes array) are
    widened to float32, which is exact: NumPy computes in no bfloat16.
    Raises :class:`InvalidArgument` naming ``name`` for strings and for what
    NumPy cannot read.

    Parameters
    ----------
    value : array_like or tensor
        The caller's array.
    name : str
        The argument's name, used in messages.

    Returns
    -------
    numpy.ndarray
        A base ndarray; it may share memory with ``value``.
    """
    if isinstance(value, np.ndarray):
        return _widened(_base_ndarray(value, name))
    # PyTorch tensors: detach from the graph and move to host memory first.
    detach = getattr(value, "detach", None)
    if callable(detach) and hasattr(value, "cpu"):
        try:
            tensor = detach().cpu()
            if str(getattr(tensor, "dtype", "")) == "torch.bfloat16":
                tensor = tensor.float()
            value = tensor.numpy()
        except Exception as exc:  # pragma: no cover - depends on torch
            raise InvalidArgument(
                f"`{name}` could not be converted to a NumPy array: {exc}"
            ) from exc
        return value
    if isinstance(value, (str, bytes)):
        raise InvalidArgument(f"`{name}` must be a numeric array, got {describe(value)}")
    try:
        arr = np.asarray(value)
    except Exception as exc:
        raise InvalidArgument(
            f"`{name}` must be a numeric array, got {describe(value)} ({exc})"
        ) from exc
    return _widened(_base_ndarray(arr, name))


def _widened(arr: np.ndarray) -> np.ndarray:
    """``arr``, a bfloat16 one (ml_dtypes', JAX's) as float32: exact, and NumPy computes in it."""
    if arr.dtype.kind == "V" and arr.dtype.name == "bfloat16":
        return arr.astype(np.float32)
    return arr


def _base_ndarray(arr: np.ndarray, name: str) -> np.ndarray:
    """``arr`` as a base :class:`numpy.ndarray` (a view, no copy).

    Subclasses change what arithmetic means: ``*`` of two ``np.matrix`` is a
    matrix product, and a masked array carries entries that are not there.
    A masked array with a real mask is refused (kernelcheck does not guess
    what a masked entry stands for); without one it is its data.
    """
    if type(arr) is np.ndarray:
        return arr
    if isinstance(arr, np.ma.MaskedArray):
        masked = int(np.count_nonzero(np.ma.getmaskarray(arr)))
        if masked:
            raise InvalidArgument(
                f"`{name}` is a masked array with {masked} masked entr"
                f"{'y' if masked == 1 else 'ies'}; fill them (`.filled(value)`) or drop them "
                "first: kernelcheck does not guess what a masked entry stands for"
            )
        return np.asarray(arr.data).view(np.ndarray)
    return arr.view(np.ndarray)


def result_dtype(*arrays: np.ndarray) -> np.dtype:
    """float32 when every array is float32, else float64.

    Parameters
    ----------
    *arrays : numpy.ndarray
        The inputs of a computation.

    Returns
    -------
    numpy.dtype
        The dtype its result is computed in.
    """
    if arrays and all(a.dtype == np.float32 for a in arrays):
        return np.dtype(np.float32)
    return np.dtype(np.float64)


def as_array(
    value: Any,
    name: str,
    *,
    ndim: int | None = None,
    min_ndim: int | None = None,
    allow_empty: bool = False,
    dtype: Any = None,
    finite: bool = True,
) -> np.ndarray:
    """Convert ``value`` to a finite real floating array, or raise.

    Parameters
    ----------
    value : array_like
        The caller's input.
    name : str
        The argument's name, used in messages.
    ndim : int, optional
        The exact number of dimensions (default: any).
    min_ndim : int, optional
        The minimum number of dimensions (default: any).
    allow_empty : bool, default False
        Whether an array with a zero-length axis is accepted.
    dtype : dtype, optional
        Force this floating dtype (default: float32 stays, all else float64).
    finite : bool, default True
        Check that every entry is finite (default).  ``False`` is for a caller
        that checks a result every non-finite entry provably reaches, and then
        names the argument with :func:`check_finite`: the contract (NaN or Inf
        is an error naming the argument) is the caller's to keep.

    Returns
    -------
    numpy.ndarray
        A floating array.  It may share memory with ``value``; callers must
        not write into it.
    """
    arr = to_numpy(value, name)
    kind = arr.dtype.kind
    if kind == "c":
        raise InvalidArgument(
            f"`{name}` must be real, got complex {describe(arr)}; pass the real part "
            "explicitly if the imaginary part is known to vanish"
        )
    if kind not in "biuf":
        raise InvalidArgument(f"`{name}` must be a real numeric array, got {describe(arr)}")
    if kind == "f" and arr.dtype.itemsize > 8:
        raise InvalidArgument(
            f"`{name}` has extended precision dtype {arr.dtype}; convert it to float64 "
            "yourself (kernelcheck will not round it silently)"
        )
    if ndim is not None and arr.ndim != ndim:
        raise InvalidArgument(
            f"`{name}` must have {ndim} dimension{'s' if ndim != 1 else ''}, got {describe(arr)}"
        )
    if min_ndim is not None and arr.ndim < min_ndim:
        raise InvalidArgument(
            f"`{name}` must have at least {min_ndim} dimensions, got {describe(arr)}"
        )
    if not allow_empty and arr.size == 0:
        raise InvalidArgument(f"`{name}` must not be empty, got {describe(arr)}")
    if dtype is not None:
        target = np.dtype(dtype)
    elif arr.dtype == np.float32:
        target = np.dtype(np.float32)
    else:
        target = np.dtype(np.float64)
    if arr.dtype != target:
        check_size(arr.size, f"a {target} copy of `{name}`", itemsize=target.itemsize)
        arr = arr.astype(target)
    if finite:
        check_finite(arr, name)
    return arr


def all_finite(a: np.ndarray) -> bool:
    """True when every entry of ``a`` is finite: one sum, and the entries only if it is not.

    NaN and Inf propagate through a sum, so a finite sum proves every entry
    finite with no boolean temporary (one pass); a sum that is not finite (a
    bad entry, or the sum itself overflowing) is decided entry by entry.

    Parameters
    ----------
    a : numpy.ndarray
        A numeric array.

    Returns
    -------
    bool
        Whether no entry is NaN or infinite.
    """
    if not a.size:
        return True
    with np.errstate(all="ignore"):
        if np.isfinite(np.add.reduce(a, axis=None)):
            return True
    return bool(np.isfinite(a).all())


def check_finite(arr: np.ndarray, name: str) -> None:
    """Raise :class:`InvalidArgument` if ``arr`` holds a NaN or an Inf (see :func:`all_finite`).

    Parameters
    ----------
    arr : numpy.ndarray
        A numeric array.
    name : str
        The argument's name, used in the message.
    """
    if not all_finite(arr):
        bad = np.argwhere(~np.isfinite(arr))
        first = tuple(int(i) for i in bad[0])
        raise InvalidArgument(
            f"`{name}` must be finite, but {len(bad)} entr{'y is' if len(bad) == 1 else 'ies are'} "
            f"NaN or Inf (first at index {first}: {arr[first]!r})"
        )


def check_computed(value: Any, what: str) -> np.ndarray:
    """A computed quantity a verdict is drawn from: real and finite, or :class:`NumericalFailure`.

    An error, a tolerance or a statistic that overflowed to ``inf`` (or
    became NaN, or complex) decides nothing -- ``inf <= inf`` is True, every
    comparison with NaN False -- so every verifier passes the numbers it
    compares through here first: a verdict is computed from finite reals
    only.  ``what`` names the quantity as the report would (``"phi(X) @
    phi(Y).T"``, ``"the tolerance"``).  Returns ``value`` as an array.

    Parameters
    ----------
    value : array_like
        The computed quantity.
    what : str
        What it is, as the report names it.

    Returns
    -------
    numpy.ndarray
        ``value`` as an array.

    Examples
    --------
    >>> check_computed([1.0, 2.0], "the error").tolist()
    [1.0, 2.0]
    >>> try:
    ...     check_computed([1.0, float("inf")], "the error")
    ... except ArithmeticError as exc:
    ...     print(str(exc).split(":")[0])
    the error is inf at index (1,)
    """
    arr = np.asarray(value)
    if arr.dtype.kind == "c":
        raise NumericalFailure(f"{what} is complex ({arr.dtype}): no verdict is drawn from it")
    if arr.dtype.kind not in "biuf":
        raise NumericalFailure(f"{what} is not a real number ({describe(arr)})")
    with np.errstate(all="ignore"):
        bad = ~np.isfinite(arr)
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0]) if arr.ndim else ()
        value_at = float(arr[first] if first else arr[()])
        where = f" at index {first}" if first else ""
        raise NumericalFailure(
            f"{what} is {value_at!r}{where}: no verdict is drawn from a non-finite number "
            "(scale the inputs down or use a wider dtype)"
        )
    return arr


def as_points(
    value: Any, name: str, *, dim: int | None = None, allow_empty: bool = False
) -> np.ndarray:
    """A point set of shape (n, d): a finite real 2-d array.

    A 1-d input is *not* promoted silently: a point set has one row per point.

    Parameters
    ----------
    value : array_like
        The caller's points.
    name : str
        The argument's name, used in messages.
    dim : int, optional
        The number of columns required (default: any).
    allow_empty : bool, default False
        Whether zero points are accepted.

    Returns
    -------
    numpy.ndarray
        A finite (n, d) floating array (see :func:`as_array`).
    """
    arr = as_array(value, name, allow_empty=allow_empty)
    if arr.ndim != 2:
        hint = ""
        if arr.ndim == 1:
            hint = (
                " (a single point x is passed as x[None, :]; "
                "n points in one dimension as x[:, None])"
            )
        raise InvalidArgument(
            f"`{name}` must be a 2-d array of shape (n, d), got {describe(arr)}{hint}"
        )
    if arr.shape[1] == 0:
        raise InvalidArgument(
            f"`{name}` must have at least one column (d >= 1), got {describe(arr)}"
        )
    if dim is not None and arr.shape[1] != dim:
        raise InvalidArgument(f"`{name}` must have d = {dim} columns, got {describe(arr)}")
    return arr


#: n x n arrays the PSD deciders may hold at once for an n x n input (the
#: matrix, a symmetrised or scaled copy, a factor, eigenvectors): what
#: :func:`as_square_matrix` checks the memory for.
SQUARE_WORKING_COPIES = 4


def as_square_matrix(value: Any, name: str) -> np.ndarray:
    """A finite real square matrix of shape (n, n), n >= 1, with memory to decide it.

    The size is checked before the matrix is converted or copied: a
    broadcast view of 50000 x 50000 takes no memory, its working copies
    (:data:`SQUARE_WORKING_COPIES` of them) 75 GiB.

    Parameters
    ----------
    value : array_like
        The caller's matrix.
    name : str
        The argument's name, used in messages.

    Returns
    -------
    numpy.ndarray
        A finite (n, n) floating array (see :func:`as_array`).
    """
    arr = to_numpy(value, name)
    if arr.ndim == 2 and arr.shape[0] == arr.shape[1]:
        n = arr.shape[0]
        check_size(
            SQUARE_WORKING_COPIES * n * n,
            f"deciding the {n} x {n} matrix `{name}` (it and {SQUARE_WORKING_COPIES - 1} "
            "working copies)",
        )
    arr = as_array(arr, name)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
        raise InvalidArgument(f"`{name}` must be a square 2-d matrix, got {describe(arr)}")
    return arr


def as_int(value: Any, name: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """An integer (not a bool, not a float), within optional bounds.

    Parameters
    ----------
    value : int
        The caller's integer (a Python or NumPy integer).
    name : str
        The argument's name, used in messages.
    minimum : int, optional
        The smallest value accepted (default: no bound).
    maximum : int, optional
        The largest value accepted (default: no bound).

    Returns
    -------
    int
        ``value`` as a Python int.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        if isinstance(value, float) and value.is_integer():
            hint = f" (got the float {value!r}; pass int({value!r}))"
        else:
            hint = f", got {describe(value)}"
        raise InvalidArgument(f"`{name}` must be an integer{hint}")
    value = operator.index(value)
    if minimum is not None and value < minimum:
        raise InvalidArgument(f"`{name}` must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise InvalidArgument(f"`{name}` must be <= {maximum}, got {value}")
    return int(value)


def as_real(
    value: Any,
    name: str,
    *,
    positive: bool = False,
    nonnegative: bool = False,
) -> float:
    """A finite real number (bools refused), optionally positive or non-negative.

    Parameters
    ----------
    value : float
        The caller's number (Python or NumPy, or a 0-d array); an integer
        beyond the float64 range is refused.
    name : str
        The argument's name, used in messages.
    positive : bool, default False
        Require ``value > 0``.
    nonnegative : bool, default False
        Require ``value >= 0``.

    Returns
    -------
    float
        ``value`` as a Python float.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf":
            value = value.item()
        else:
            raise InvalidArgument(f"`{name}` must be a real number, got {describe(value)}")
    try:
        value = float(value)
    except OverflowError:  # an integer (or Fraction) beyond the float64 range
        digits = len(str(abs(int(value))))
        raise InvalidArgument(
            f"`{name}` must be finite in float64 (at most about 1.8e308), got a number of "
            f"{digits} digits"
        ) from None
    if not math.isfinite(value):
        raise InvalidArgument(f"`{name}` must be finite, got {value}")
    if positive and not value > 0:
        raise InvalidArgument(f"`{name}` must be > 0, got {value}")
    if nonnegative and not value >= 0:
        raise InvalidArgument(f"`{name}` must be >= 0, got {value}")
    return value


def as_probability(value: Any, name: str) -> float:
    """A number strictly between 0 and 1 (a significance level, a confidence).

    Parameters
    ----------
    value : float
        The caller's number.
    name : str
        The argument's name, used in messages.

    Returns
    -------
    float
        ``value`` as a Python float in (0, 1).
    """
    value = as_real(value, name)
    if not 0.0 < value < 1.0:
        raise InvalidArgument(f"`{name}` must lie strictly between 0 and 1, got {value}")
    return value


def check_choice(value: Any, name: str, choices) -> Any:
    """``value`` must be one of ``choices``.

    Parameters
    ----------
    value : object
        The caller's choice.
    name : str
        The argument's name, used in messages.
    choices : collection
        The accepted values, listed in the message.

    Returns
    -------
    object
        ``value``.
    """
    try:
        known = value in choices
    except (TypeError, ValueError):  # an array compares elementwise: not a choice
        known = False
    if not known:
        listed = ", ".join(repr(c) for c in choices)
        raise InvalidArgument(f"`{name}` must be one of {listed}; got {value!r}")
    return value


def check_callable(value: Any, name: str) -> Any:
    """``value`` must be callable.

    Parameters
    ----------
    value : object
        The caller's callable.
    name : str
        The argument's name, used in messages.

    Returns
    -------
    object
        ``value``.
    """
    if not callable(value):
        raise InvalidArgument(f"`{name}` must be callable, got {describe(value)}")
    return value


def as_executor(value: Any, name: str = "executor") -> Any:
    """``None`` or a :class:`concurrent.futures.Executor`-like object (it has ``submit``).

    Parameters
    ----------
    value : concurrent.futures.Executor or None
        The caller's executor.
    name : str, default "executor"
        The argument's name, used in messages.

    Returns
    -------
    concurrent.futures.Executor or None
        ``value``.
    """
    if value is not None and not callable(getattr(value, "submit", None)):
        raise InvalidArgument(
            f"`{name}` must be a concurrent.futures.Executor (an object with submit), "
            f"got {describe(value)}"
        )
    return value


def as_bool(value: Any, name: str) -> bool:
    """``True`` or ``False`` (NumPy booleans too); anything else (``1``, ``"yes"``) is refused.

    Parameters
    ----------
    value : bool
        The caller's flag.
    name : str
        The argument's name, used in messages.

    Returns
    -------
    bool
        ``value`` as a Python bool.
    """
    if not isinstance(value, (bool, np.bool_)):
        raise InvalidArgument(f"`{name}` must be True or False, got {describe(value)}")
    return bool(value)


def as_float_dtype(value: Any, name: str = "dtype", *, allowed=("float64", "float32")) -> np.dtype:
    """A floating dtype among ``allowed`` (names in ``rounding.PRECISIONS``).

    Accepts NumPy dtypes and types and their names; returns the NumPy dtype.

    Parameters
    ----------
    value : dtype, type or str
        The caller's dtype.
    name : str, default "dtype"
        The argument's name, used in messages.
    allowed : tuple of str, default ("float64", "float32")
        The accepted dtype names.

    Returns
    -------
    numpy.dtype
        The dtype.
    """
    try:
        dt = np.dtype(value)
    except TypeError:
        dt = None
    if dt is None or dt.name not in allowed:
        listed = " or ".join(allowed)
        got = repr(value) if dt is None else dt.name
        raise InvalidArgument(f"`{name}` must be {listed}, got {got}")
    return dt


def as_int_tuple(value: Any, name: str, *, minimum: int | None = None) -> tuple[int, ...]:
    """A tuple of integers (e.g. a ``batch_shape``), each at least ``minimum``.

    Parameters
    ----------
    value : tuple of int
        The caller's tuple.
    name : str
        The argument's name, used in messages.
    minimum : int, optional
        The smallest entry accepted (default: no bound).

    Returns
    -------
    tuple of int
        The entries as Python ints.
    """
    if not isinstance(value, tuple):
        raise InvalidArgument(f"`{name}` must be a tuple of ints, got {describe(value)}")
    return tuple(as_int(v, name, minimum=minimum) for v in value)
