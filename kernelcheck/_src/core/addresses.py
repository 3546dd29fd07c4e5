"""Addresses of a Dask scheduler, checked before any connection is tried."""

from __future__ import annotations

from typing import Any

from kernelcheck._src.core.validate import describe
from kernelcheck.errors import InvalidArgument

__all__ = ["SCHEDULER_SCHEMES", "as_scheduler_address", "scheduler_host_port"]


#: Address schemes of Dask's communication layer (``distributed.comm``).
SCHEDULER_SCHEMES = ("tcp", "tls", "ws", "wss", "ucx", "inproc")


def as_scheduler_address(value: Any, name: str = "scheduler") -> str:
    """A Dask scheduler address: ``scheme://host:port`` or ``host:port``.

    The scheme is one of :data:`SCHEDULER_SCHEMES` (``tcp`` when omitted);
    the port an integer 1..65535 (``inproc://`` addresses have none).
    Returns the address stripped of surrounding blanks.  Whether a
    scheduler answers there is not checked here (the command line probes it
    before any work).

    Parameters
    ----------
    value : str
        The caller's address.
    name : str, default "scheduler"
        The argument's name, used in messages.

    Returns
    -------
    str
        The address without surrounding blanks.
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
    """``(host, port)`` of a TCP-like address from :func:`as_scheduler_address`, else None.

    Parameters
    ----------
    address : str
        An address :func:`as_scheduler_address` accepted.

    Returns
    -------
    tuple of (str, int) or None
        Its host and port; None for a scheme without them (``ucx``, ``inproc``).
    """
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "tcp", address
    if scheme not in ("tcp", "tls", "ws", "wss"):
        return None
    host, _, port = rest.rpartition(":")
    return host.strip("[]"), int(port)
