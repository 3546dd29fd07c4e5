"""The memory an intermediate may take: refused up front, before it is allocated.

:func:`check_size` is called with the exact number of entries an
intermediate will have, before any array of that size exists; it refuses
with :class:`~kernelcheck.errors.InvalidArgument` what :func:`memory_budget`
does not allow, saying how much memory the request would need.
"""

from __future__ import annotations

import os

from kernelcheck.errors import InvalidArgument

__all__ = ["MAX_ELEMENTS", "memory_budget", "check_size"]


#: Largest number of float64 elements a single intermediate may have before a
#: function refuses the input up front (about 16 GiB of float64).
MAX_ELEMENTS = 2 * 1024**3


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


def _gib(nbytes: int) -> str:
    """``nbytes`` in GiB to one decimal; a count beyond float64 as its power of ten."""
    gib = nbytes // 1024**3
    if gib >= 10**300:  # int / int beyond float64's range raises OverflowError
        return f"about 10^{len(str(gib)) - 1} GiB"
    return f"{nbytes / 1024**3:.1f} GiB"


def check_size(elements: int, what: str, *, itemsize: int = 8) -> None:
    """Refuse, before it is allocated, an intermediate too large for this process.

    ``elements`` entries of ``itemsize`` bytes (8: float64) need
    ``elements * itemsize`` bytes; the request is refused with
    :class:`InvalidArgument` saying how much memory it would need when it
    has more than :data:`MAX_ELEMENTS` entries or more bytes than
    :func:`memory_budget` allows.  ``elements`` is an exact Python integer
    (products of sizes never wrap around as fixed-width integers do).

    Parameters
    ----------
    elements : int
        The number of entries the intermediate will have.
    what : str
        What it is, as the message names it (``"the Gram block"``).
    itemsize : int, default 8
        Bytes per entry.

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
