"""Input validation shared by every public function.

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
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import operator
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from kernelcheck._src.core.deadline import run_user, user_deadline
from kernelcheck.errors import (
    BadNormalizer,
    InfiniteFeatureSpace,
    InvalidArgument,
    NumericalFailure,
)

__all__ = [
    "describe",
    "OWN_ERRORS",
    "to_numpy",
    "as_array",
    "as_points",
    "as_square_matrix",
    "check_finite",
    "as_int",
    "as_real",
    "as_probability",
    "as_rng",
    "check_choice",
    "check_callable",
    "call_user",
    "not_real",
    "as_timeout",
    "as_executor",
    "honours_timeout",
    "as_bool",
    "as_float_dtype",
    "as_int_tuple",
    "as_seed_sequence",
    "as_output_folder",
    "as_input_file",
    "as_scheduler_address",
    "result_dtype",
    "MAX_ELEMENTS",
    "check_size",
    "check_computed",
    "memory_budget",
]

#: Largest number of float64 elements a single intermediate may have before a
#: function refuses the input up front (about 16 GiB of float64).
MAX_ELEMENTS = 2 * 1024**3


def describe(value: Any) -> str:
    """A short description of ``value`` for error messages (type, shape, dtype)."""
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


#: kernelcheck's own errors: raised inside a user's callable (which may call
#: kernelcheck), they pass through :func:`call_user` unchanged.
OWN_ERRORS = (InvalidArgument, InfiniteFeatureSpace, NumericalFailure, BadNormalizer)


def to_numpy(value: Any, name: str) -> np.ndarray:
    """``value`` as a NumPy array: the one converter of arrays and tensors.

    NumPy arrays are returned as they are; a PyTorch tensor is detached and
    moved to host memory (a bfloat16 tensor is widened to float32 first, which
    is exact: NumPy has no bfloat16); anything else goes through
    :func:`numpy.asarray`.  Raises :class:`InvalidArgument` naming ``name``
    for strings and for what NumPy cannot read.
    """
    if isinstance(value, np.ndarray):
        return _base_ndarray(value, name)
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
    return _base_ndarray(arr, name)


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
    """float32 when every array is float32, else float64."""
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
    ndim, min_ndim : int, optional
        Exact or minimum number of dimensions.
    allow_empty : bool
        Whether an array with a zero-length axis is accepted.
    dtype : dtype, optional
        Force this floating dtype (default: float32 stays, all else float64).
    finite : bool
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
    """
    if not a.size:
        return True
    with np.errstate(all="ignore"):
        if np.isfinite(np.add.reduce(a, axis=None)):
            return True
    return bool(np.isfinite(a).all())


def check_finite(arr: np.ndarray, name: str) -> None:
    """Raise :class:`InvalidArgument` if ``arr`` holds a NaN or an Inf (see :func:`all_finite`)."""
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
    """An integer (not a bool, not a float), within optional bounds."""
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
    """A finite real number (bools refused), optionally positive or non-negative."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf":
            value = value.item()
        else:
            raise InvalidArgument(f"`{name}` must be a real number, got {describe(value)}")
    value = float(value)
    if not math.isfinite(value):
        raise InvalidArgument(f"`{name}` must be finite, got {value}")
    if positive and not value > 0:
        raise InvalidArgument(f"`{name}` must be > 0, got {value}")
    if nonnegative and not value >= 0:
        raise InvalidArgument(f"`{name}` must be >= 0, got {value}")
    return value


def as_probability(value: Any, name: str) -> float:
    """A number strictly between 0 and 1 (a significance level, a confidence)."""
    value = as_real(value, name)
    if not 0.0 < value < 1.0:
        raise InvalidArgument(f"`{name}` must lie strictly between 0 and 1, got {value}")
    return value


def as_rng(seed: Any, name: str = "seed") -> np.random.Generator:
    """A NumPy Generator from a seed, SeedSequence or Generator.

    ``None`` is refused: every random function in kernelcheck is reproducible,
    so the caller states the seed.
    """
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, np.random.SeedSequence):
        return np.random.default_rng(seed)
    return np.random.default_rng(_seed_int(seed, name))


def check_choice(value: Any, name: str, choices) -> Any:
    """``value`` must be one of ``choices``."""
    try:
        known = value in choices
    except (TypeError, ValueError):  # an array compares elementwise: not a choice
        known = False
    if not known:
        listed = ", ".join(repr(c) for c in choices)
        raise InvalidArgument(f"`{name}` must be one of {listed}; got {value!r}")
    return value


def check_callable(value: Any, name: str) -> Any:
    """``value`` must be callable."""
    if not callable(value):
        raise InvalidArgument(f"`{name}` must be callable, got {describe(value)}")
    return value


def memory_budget() -> tuple[int, str]:
    """The most bytes one intermediate may take, and why: ``(bytes, reason)``.

    The smallest of

    * the fixed cap :data:`MAX_ELEMENTS` float64 entries (16 GiB);
    * the machine's physical memory (``SC_PHYS_PAGES``): more cannot be
      resident at once;
    * half of what the process may still map under its address-space limit
      (``RLIMIT_AS`` minus the current ``VmSize`` of ``/proc/self/statm``):
      every caller keeps at least one more array of the same size (the
      result, or the temporary it is computed from), so an intermediate
      larger than half the headroom cannot be completed.

    Read at each call (two system calls), so a limit set by ``ulimit -v`` or
    :func:`resource.setrlimit` after import is honoured.
    """
    budget, reason = MAX_ELEMENTS * 8, f"the cap of {MAX_ELEMENTS} float64 entries"
    try:
        phys = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
        phys = -1
    if 0 < phys < budget:
        budget, reason = phys, "the machine's physical memory"
    headroom = _address_space_headroom()
    if headroom is not None and headroom // 2 < budget:
        budget = max(0, headroom // 2)
        reason = "half of the memory this process may still map under its address-space limit"
    return budget, reason


def _address_space_headroom() -> int | None:
    """Bytes the process may still map under ``RLIMIT_AS`` (None when unlimited)."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError):  # pragma: no cover - not POSIX
        return None
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            used = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):  # pragma: no cover - no procfs
        used = 0
    return soft - used


def _gib(nbytes: float) -> str:
    return f"{nbytes / 1024**3:.1f} GiB"


def check_size(elements: int, what: str, *, itemsize: int = 8) -> None:
    """Refuse, before it is allocated, an intermediate too large for this process.

    ``elements`` entries of ``itemsize`` bytes (8: float64) need
    ``elements * itemsize`` bytes; the request is refused with
    :class:`InvalidArgument` saying how much memory it would need when it
    has more than :data:`MAX_ELEMENTS` entries or more bytes than
    :func:`memory_budget` allows.  ``elements`` is an exact Python integer
    (products of sizes never wrap around as fixed-width integers do).

    Examples
    --------
    >>> check_size(10**6, "a small Gram block")
    >>> try:
    ...     check_size(10**12, "the Gram block")
    ... except ValueError as exc:
    ...     print(str(exc)[:60])
    the Gram block would need 1000000000000 entries (7450.6 GiB)
    """
    elements = int(elements)
    need = elements * int(itemsize)
    if elements > MAX_ELEMENTS:
        limit, reason = MAX_ELEMENTS, ""
    else:
        budget, why = memory_budget()
        if need <= budget:
            return
        limit, reason = budget // itemsize, f", {_gib(budget)}: {why}"
    raise InvalidArgument(
        f"{what} would need {elements} entries ({_gib(need)}); the limit is "
        f"{limit} entries{reason}. Use smaller inputs, a truncated order or fewer features"
    )


def call_user(fn: Callable, label: str, *args: Any, **kwargs: Any) -> Any:
    """Call a user's callable ``fn(*args, **kwargs)``: the one wrapper of user code.

    * NumPy array arguments are passed as copies, so a callable that writes
      into its argument never changes the caller's data (nor the verdict);
    * the call waits at most until the deadline of the enclosing
      :func:`user_deadline` (see :func:`run_user`);
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
      callers read arrays with :func:`as_array` (or :func:`as_real`), which
      also refuses NaN and Inf, naming the call.
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
    """A complex, object, string or bytes array or scalar (a NumPy one, a Python one, a tensor)."""
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


def as_executor(value: Any, name: str = "executor") -> Any:
    """``None`` or a :class:`concurrent.futures.Executor`-like object (it has ``submit``)."""
    if value is not None and not callable(getattr(value, "submit", None)):
        raise InvalidArgument(
            f"`{name}` must be a concurrent.futures.Executor (an object with submit), "
            f"got {describe(value)}"
        )
    return value


def as_timeout(value: Any, name: str = "timeout") -> float | None:
    """``None`` (no limit) or a positive finite number of seconds."""
    if value is None:
        return None
    return as_real(value, name, positive=True)


def honours_timeout(func: Callable) -> Callable:
    """Decorator: run ``func`` under :func:`user_deadline` of its ``timeout=`` argument.

    ``func`` declares (and documents) a keyword argument ``timeout`` and may
    ignore it: the decorator validates it (:func:`as_timeout`) and bounds
    every user call made through :func:`call_user` / :func:`run_user` while
    ``func`` runs.
    """
    default = inspect.signature(func).parameters["timeout"].default

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        timeout = as_timeout(kwargs.get("timeout", default))
        with user_deadline(timeout):
            return func(*args, **kwargs)

    return wrapper


def as_bool(value: Any, name: str) -> bool:
    """``True`` or ``False`` (NumPy booleans too); anything else (``1``, ``"yes"``) is refused."""
    if not isinstance(value, (bool, np.bool_)):
        raise InvalidArgument(f"`{name}` must be True or False, got {describe(value)}")
    return bool(value)


def as_float_dtype(value: Any, name: str = "dtype", *, allowed=("float64", "float32")) -> np.dtype:
    """A floating dtype among ``allowed`` (names in ``rounding.PRECISIONS``).

    Accepts NumPy dtypes and types and their names; returns the NumPy dtype.
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
    """A tuple of integers (e.g. a ``batch_shape``), each at least ``minimum``."""
    if not isinstance(value, tuple):
        raise InvalidArgument(f"`{name}` must be a tuple of ints, got {describe(value)}")
    return tuple(as_int(v, name, minimum=minimum) for v in value)


def as_seed_sequence(seed: Any, name: str = "seed") -> np.random.SeedSequence:
    """The root :class:`numpy.random.SeedSequence` of a seeded computation.

    An int or a SeedSequence is used as is; a Generator gives up 128 bits of
    its stream as entropy (deterministic, and it advances the Generator).
    ``None`` is refused, as by :func:`as_rng`.
    """
    if isinstance(seed, np.random.SeedSequence):
        return seed
    if isinstance(seed, np.random.Generator):
        return np.random.SeedSequence([int(v) for v in seed.integers(0, 2**63, size=2)])
    return np.random.SeedSequence(_seed_int(seed, name))


def _seed_int(seed: Any, name: str) -> int:
    if seed is None:
        raise InvalidArgument(
            f"`{name}` must be given (an int, a numpy.random.SeedSequence or a Generator); "
            "kernelcheck never draws from unseeded randomness"
        )
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise InvalidArgument(
            f"`{name}` must be a non-negative int, a numpy.random.SeedSequence or a "
            f"numpy.random.Generator, got {describe(seed)}"
        )
    return int(seed)


def as_output_folder(value: Any, name: str = "out") -> Path:
    """A folder a report can be written into, checked before any work.

    The path must be a non-empty string or path-like; if it exists it must be
    a folder this process can write into; if not, its nearest existing parent
    must be such a folder (the report writer creates the rest).  Writability
    is probed by creating (and removing) an empty file, so read-only mounts
    and special file systems are refused as well as permissions.
    """
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        raise InvalidArgument(f"`{name}` must be a folder path, got {describe(value)}")
    path = Path(value)
    if path.exists() and not path.is_dir():
        raise InvalidArgument(f"`{name}` must be a folder, but {str(path)!r} is a file")
    probe = path
    while not probe.exists():
        if probe.is_symlink():
            raise InvalidArgument(f"`{name}` {str(path)!r}: {str(probe)!r} is a dangling link")
        probe = probe.parent
    if not probe.is_dir():
        raise InvalidArgument(
            f"`{name}` {str(path)!r} cannot be created: {str(probe)!r} is not a folder"
        )
    try:  # a real probe: permissions, read-only mounts and /proc all refuse a file
        fd, tmp = tempfile.mkstemp(prefix=".kernelcheck-probe.", dir=probe)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise InvalidArgument(
            f"`{name}` {str(path)!r}: cannot write into {str(probe)!r} ({reason})"
        ) from None
    os.close(fd)
    os.unlink(tmp)
    return path


def as_input_file(value: Any, name: str = "file") -> Path:
    """An existing regular file to read, checked without opening it.

    Folders, FIFOs, sockets and devices (``/dev/zero``, a terminal) are
    refused at once: reading a FIFO blocks until a writer comes, a device
    can be endless.  ``os.stat`` does neither.
    """
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        raise InvalidArgument(f"`{name}` must be a file path, got {describe(value)}")
    path = Path(value)
    try:
        info = path.stat()
    except FileNotFoundError:
        raise InvalidArgument(f"no such file: {str(path)!r}") from None
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise InvalidArgument(f"cannot read {str(path)!r}: {reason}") from None
    if stat.S_ISDIR(info.st_mode):
        raise InvalidArgument(f"{str(path)!r} is a folder, not a matrix file")
    if not stat.S_ISREG(info.st_mode):
        kind = (
            "a FIFO"
            if stat.S_ISFIFO(info.st_mode)
            else "a socket"
            if stat.S_ISSOCK(info.st_mode)
            else "a device"
        )
        raise InvalidArgument(
            f"{str(path)!r} is {kind}, not a regular file; save the matrix to a file first"
        )
    return path


#: Address schemes of Dask's communication layer (``distributed.comm``).
SCHEDULER_SCHEMES = ("tcp", "tls", "ws", "wss", "ucx", "inproc")


def as_scheduler_address(value: Any, name: str = "scheduler") -> str:
    """A Dask scheduler address: ``scheme://host:port`` or ``host:port``.

    The scheme is one of :data:`SCHEDULER_SCHEMES` (``tcp`` when omitted);
    the port an integer 1..65535 (``inproc://`` addresses have none).
    Returns the address stripped of surrounding blanks.  Whether a
    scheduler answers there is not checked here (the command line probes it
    before any work).
    """
    expected = f"a scheduler address such as 'tcp://10.0.0.5:8786', got {describe(value)}"
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument(f"`{name}` must be {expected}")
    address = value.strip()
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "tcp", address
    if scheme not in SCHEDULER_SCHEMES:
        listed = ", ".join(SCHEDULER_SCHEMES)
        raise InvalidArgument(f"`{name}` must use one of the schemes {listed}; {expected}")
    if scheme == "inproc":
        if not rest:
            raise InvalidArgument(f"`{name}` must be {expected}")
        return address
    host, colon, port = rest.rpartition(":")
    host = host.strip("[]")
    if (
        not colon
        or not host
        or any(c.isspace() or c in "/?#@" for c in host)
        or not port.isdigit()
        or not 1 <= int(port) <= 65535
    ):
        raise InvalidArgument(f"`{name}` must be {expected}")
    return address


def scheduler_host_port(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of a TCP-like address from :func:`as_scheduler_address`, else None."""
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "tcp", address
    if scheme not in ("tcp", "tls", "ws", "wss"):
        return None
    host, _, port = rest.rpartition(":")
    return host.strip("[]"), int(port)
