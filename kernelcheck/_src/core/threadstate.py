"""The thread-local state of array frameworks, carried into another thread.

A user's callable that runs under a deadline runs in a thread of its own
(:func:`kernelcheck._src.core.deadline.run_user`).  A new thread starts from
each framework's global defaults, not from the modes the caller set for its
own thread, so without help a float64 JAX layer called under
``jax.enable_x64(True)`` would compute in float32 there, and a torch layer
called under ``torch.no_grad()`` would build a graph.  :func:`capture` reads
the calling thread's modes; the function it returns enters the same modes in
the thread it is called in:

* JAX (the options :data:`JAX_CONTEXTS` lists, each set for one thread by a
  public context manager): ``jax.enable_x64``, ``jax.default_matmul_precision``,
  ``jax.default_device``, the dtype and rank promotion rules, ``jax.disable_jit``
  and the NaN/Inf debugging flags;
* PyTorch: grad mode (``torch.no_grad()``, ``torch.enable_grad()``), inference
  mode, autocast (device type and dtype, for each device type of
  :data:`TORCH_AUTOCAST_DEVICES`) and the default device set by
  ``with torch.device(...)``.  The default dtype (``torch.set_default_dtype``)
  is global in PyTorch, so every thread sees it already.

Only frameworks already imported are read (``sys.modules``): kernelcheck
never imports PyTorch or JAX for this, and a caller that never imported
them has no state of theirs to carry.  NumPy's error state and context
variables are carried by the caller (see ``run_user``).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["JAX_CONTEXTS", "TORCH_AUTOCAST_DEVICES", "capture"]

#: JAX options a context manager sets for the calling thread only: the option
#: as ``jax.config`` reads it (the value in effect in this thread) and the
#: public context manager of ``jax`` that sets it.  An option this JAX version
#: lacks is skipped.
JAX_CONTEXTS = (
    ("jax_enable_x64", "enable_x64"),
    ("jax_default_matmul_precision", "default_matmul_precision"),
    ("jax_default_device", "default_device"),
    ("jax_numpy_dtype_promotion", "numpy_dtype_promotion"),
    ("jax_numpy_rank_promotion", "numpy_rank_promotion"),
    ("jax_disable_jit", "disable_jit"),
    ("jax_debug_nans", "debug_nans"),
    ("jax_debug_infs", "debug_infs"),
)

#: Device types whose autocast state PyTorch keeps per thread; one this
#: PyTorch does not know is skipped.
TORCH_AUTOCAST_DEVICES = ("cpu", "cuda", "xpu", "mps", "hpu", "xla", "ipu", "mtia")

#: A setting read in the caller's thread: ``(read it here, enter a value here)``
#: with the value read there.  Entering happens only where the value differs.
_Setting = tuple[Callable[[], Any], Callable[[Any], Any], Any]


def capture() -> Callable[[], contextlib.ExitStack]:
    """The calling thread's framework modes, as a function that enters them in another thread.

    Returns
    -------
    callable
        ``enter()`` returns an :class:`contextlib.ExitStack` that, used as a
        context manager in the thread ``enter`` is called in, sets there
        every mode whose value differs from the one the caller had, and
        restores it on exit.

    Examples
    --------
    >>> import threading
    >>> enter = capture()
    >>> seen = []
    >>> def work():
    ...     with enter():
    ...         seen.append(True)
    >>> t = threading.Thread(target=work)
    >>> t.start(); t.join()
    >>> seen
    [True]
    """
    settings = _jax_settings() + _torch_settings()

    def enter() -> contextlib.ExitStack:
        stack = contextlib.ExitStack()
        try:
            for read, enter_value, value in settings:
                if read() != value:
                    stack.enter_context(enter_value(value))
        except BaseException:
            stack.close()
            raise
        return stack

    return enter


def _jax_settings() -> list[_Setting]:
    jax: Any = sys.modules.get("jax")
    config = getattr(jax, "config", None)
    if config is None:  # not imported, or still importing
        return []
    out: list[_Setting] = []
    for option, manager in JAX_CONTEXTS:
        context = getattr(jax, manager, None)
        if context is None or not hasattr(config, option):
            continue
        out.append((_option_reader(config, option), context, getattr(config, option)))
    return out


def _option_reader(config: Any, option: str) -> Callable[[], Any]:
    return lambda: getattr(config, option)


def _torch_settings() -> list[_Setting]:
    torch: Any = sys.modules.get("torch")
    if getattr(torch, "is_grad_enabled", None) is None:  # not imported, or still importing
        return []
    out: list[_Setting] = [
        (torch.is_grad_enabled, torch.set_grad_enabled, torch.is_grad_enabled()),
    ]
    if hasattr(torch, "is_inference_mode_enabled"):
        mode = torch.is_inference_mode_enabled()
        out.append((torch.is_inference_mode_enabled, torch.inference_mode, mode))
    if hasattr(torch, "get_default_device"):
        out.append((torch.get_default_device, torch.device, torch.get_default_device()))
    for device in TORCH_AUTOCAST_DEVICES:
        try:
            state = (torch.is_autocast_enabled(device), torch.get_autocast_dtype(device))
        except (RuntimeError, TypeError, AttributeError):  # a device type this torch lacks
            continue
        out.append((_autocast_reader(torch, device), _autocast_enterer(torch, device), state))
    return out


def _autocast_reader(torch: Any, device: str) -> Callable[[], tuple[bool, Any]]:
    return lambda: (torch.is_autocast_enabled(device), torch.get_autocast_dtype(device))


def _autocast_enterer(torch: Any, device: str) -> Callable[[tuple[bool, Any]], Any]:
    def enter(state: tuple[bool, Any]) -> Any:
        enabled, dtype = state
        return torch.autocast(device, dtype=dtype, enabled=enabled)

    return enter
