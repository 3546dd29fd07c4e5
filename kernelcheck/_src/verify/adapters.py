"""Framework adapters: NumPy, PyTorch and JAX arrays in and out of a verifier, float64 to bfloat16.

A verifier generates its inputs in float64, rounds them to the precision the
user's layer computes in, hands them over as that framework's arrays on the
requested device, and reads the outputs (and gradients) back.  The reference
is computed in float64 from exactly the rounded values the layer received:
:func:`round_to` rounds float64 directly to the target format (round to
nearest, ties to even, gradual underflow), never through an intermediate
format (a double rounding float64 -> float32 -> bfloat16 is off by one ulp
in about one case in 2^16), and the framework conversion of the rounded
values is then exact.

torch and jax are imported only when asked for; a missing one is an
:class:`~kernelcheck.errors.InvalidArgument` saying how to install it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from kernelcheck._src.core.rounding import PRECISIONS, PRODUCT_ONLY, Precision, precision
from kernelcheck._src.core.validate import check_choice, describe
from kernelcheck.errors import InvalidArgument

__all__ = [
    "FRAMEWORKS",
    "Adapter",
    "adapter",
    "round_to",
    "framework_of",
]

#: The frameworks a verifier can hand its inputs to.
FRAMEWORKS = ("numpy", "torch", "jax")

_INSTALL = {
    "torch": "pip install torch (CPU wheels: pip install torch --index-url "
    "https://download.pytorch.org/whl/cpu)",
    "jax": "pip install jax",
}


def round_to(x: np.ndarray, prec: Precision | str) -> np.ndarray:
    """``x`` (float64) rounded to the nearest value of ``prec``, ties to even, as float64.

    Every result is exactly representable in ``prec``; values beyond its
    largest finite number raise :class:`InvalidArgument` (an input that does
    not fit the layer's precision is the caller's to scale).  For ``"tf32"``
    the result is a float32 number with its 13 lowest fraction bits zero: the
    operand a TF32 matrix product uses in place of ``x``.

    Examples
    --------
    >>> float(round_to(np.array(1.0 + 2.0**-11), "tf32")[()])   # a tie: to the even 1
    1.0
    >>> float(round_to(np.array(1.0 + 3 * 2.0**-11), "tf32")[()]) == 1.0 + 2.0**-9
    True
    """
    p = precision(prec)
    x = np.asarray(x, dtype=np.float64)
    if p.name == "float64":
        return x.copy()
    bits = round(-np.log2(p.u))  # u = 2^-p: p significand bits, the hidden one included
    emin = round(np.log2(p.tiny))
    with np.errstate(divide="ignore"):
        e = np.floor(np.log2(np.abs(x)))
    e = np.where(np.isfinite(e), np.maximum(e, emin), emin)
    spacing = np.ldexp(1.0, (e - bits + 1).astype(np.int64))
    r = np.rint(x / spacing) * spacing  # exact: a power-of-two scaling, rint ties to even
    if np.abs(r).max(initial=0.0) > p.max:
        big = float(np.abs(x).max())
        raise InvalidArgument(
            f"an input of magnitude {big:.3g} is beyond the largest {p.name} number "
            f"({p.max:.3g}); scale the inputs down"
        )
    return r


def framework_of(value: Any) -> str:
    """``"torch"``, ``"jax"`` or ``"numpy"``: the framework an array belongs to."""
    mod = type(value).__module__.split(".")[0]
    if mod == "torch":
        return "torch"
    if mod in ("jax", "jaxlib"):
        return "jax"
    return "numpy"


@dataclass(frozen=True)
class Adapter:
    """One framework: its module, a dtype, a device.

    Attributes
    ----------
    framework : str
        One of :data:`FRAMEWORKS`.
    precision : Precision
        The format inputs are rounded to and handed over in.
    device : object
        The framework's device (``None`` for NumPy, and for the default device).
    module : object
        The imported framework module (``numpy``, ``torch``, ``jax.numpy``).
    """

    framework: str
    precision: Precision
    device: Any
    module: Any

    @property
    def native_dtype(self) -> Any:
        """The framework's dtype object for :attr:`precision`."""
        name = self.precision.name
        if name in PRODUCT_ONLY:
            raise InvalidArgument(
                f"`dtype` {name} is the operand format of matrix products, not an array dtype: "
                "pass dtype='float32' and describe the products with a RoundingModel whose "
                f"storage is {name}"
            )
        if self.framework == "torch":
            return getattr(self.module, name)
        if self.framework == "jax":
            return getattr(self.module, name)
        if name == "bfloat16":
            raise InvalidArgument(
                "`dtype` bfloat16 needs framework='torch' or 'jax' (NumPy has no bfloat16)"
            )
        return np.dtype(name)

    def to_framework(self, x: np.ndarray, *, requires_grad: bool = False) -> Any:
        """The float64 array ``x``, already rounded by :func:`round_to`, as a framework array."""
        if self.framework == "numpy":
            return np.asarray(x, dtype=self.native_dtype).copy()
        if self.framework == "torch":
            t = self.module.tensor(np.asarray(x, dtype=np.float64), device=self.device)
            t = t.to(self.native_dtype)
            if requires_grad:
                t.requires_grad_(True)
            return t
        arr = self.module.asarray(np.asarray(x, dtype=np.float64), dtype=self.native_dtype)
        if self.device is not None:
            import jax

            arr = jax.device_put(arr, self.device)
        return arr

    def to_framework_int(self, x: np.ndarray) -> Any:
        """Integers (sequence offsets, ...) as an int64 array of the framework (int32 in jax).

        Parameters
        ----------
        x : numpy.ndarray
            The integers.

        Returns
        -------
        numpy.ndarray, torch.Tensor or jax.Array
        """
        ints = np.asarray(x, dtype=np.int64)
        if self.framework == "numpy":
            return ints.copy()
        if self.framework == "torch":
            return self.module.tensor(ints, device=self.device)
        arr = self.module.asarray(ints.astype(np.int32))
        if self.device is not None:
            import jax

            arr = jax.device_put(arr, self.device)
        return arr

    def to_numpy(
        self, value: Any, name: str = "output", source: str = "fn"
    ) -> tuple[np.ndarray, str]:
        """A layer's output read back: float64 values and the name of the format it came in.

        Raises :class:`InvalidArgument` naming ``source`` (the callable that
        returned ``value``: ``fn``, ``vjp``, ``read_state``) and ``name`` for a
        non-array, an array of another framework, a non-floating dtype, or a
        masked array with masked entries.
        """
        fw = framework_of(value)
        who = f"`{source}`"
        # framework="numpy" reads any array (a layer may return a CPU tensor); a torch or
        # jax layer must answer in its own framework
        if fw != self.framework and self.framework != "numpy":
            raise InvalidArgument(
                f"{who} returned a {fw} array as its {name}; with framework={self.framework!r} "
                f"it must return a {self.framework} array"
            )
        if fw == "torch":
            t = value.detach().cpu()
            dname = str(t.dtype).rsplit(".", 1)[-1]
            if dname not in PRECISIONS:
                raise InvalidArgument(f"{who} returned a {name} of dtype {t.dtype}, not a float")
            import torch

            return t.to(torch.float64).numpy(), dname
        if fw == "jax":
            dname = str(value.dtype)
            if dname not in PRECISIONS:
                raise InvalidArgument(
                    f"{who} returned a {name} of dtype {value.dtype}, not a float"
                )
            return np.asarray(value).astype(np.float64), dname
        if not isinstance(value, np.ndarray) and not np.isscalar(value):
            if not hasattr(value, "__array__") and not isinstance(value, (list, tuple)):
                raise InvalidArgument(
                    f"{who} returned {describe(value)} as its {name}, not an array"
                )
        if isinstance(value, np.ma.MaskedArray) and np.ma.getmaskarray(value).any():
            masked = int(np.count_nonzero(np.ma.getmaskarray(value)))
            raise InvalidArgument(
                f"{who} returned a masked array as its {name}, with {masked} masked entries: "
                "an output holds every entry"
            )
        arr = np.asarray(value)
        if arr.dtype.kind != "f" or arr.dtype.name not in PRECISIONS:
            raise InvalidArgument(f"{who} returned a {name} of {describe(arr)}, not a float array")
        return arr.astype(np.float64), arr.dtype.name


def _module(framework: str) -> Any:
    if framework == "numpy":
        return np
    name = "torch" if framework == "torch" else "jax.numpy"
    try:
        return importlib.import_module(name)
    except ImportError:
        raise InvalidArgument(
            f"`framework` {framework!r} needs {framework}, which is not installed: "
            f"{_INSTALL[framework]}"
        ) from None


def _first_sentence(exc: BaseException) -> str:
    """The first sentence of an exception's message (PyTorch's run on for 50 lines)."""
    text = " ".join(str(exc).split("\n", 1)[0].split()) or type(exc).__name__
    return text.split(". ", 1)[0].rstrip(".")


def _device(framework: str, module: Any, device: Any) -> Any:
    if device is None:
        return None
    if framework == "numpy":
        if device in ("cpu",):
            return None
        raise InvalidArgument(f"`device` {device!r} does not apply to NumPy arrays (pass None)")
    if framework == "torch":
        try:
            dev = module.device(device)
            # a round trip: a device whose tensors hold no data (``meta``) fails here
            module.zeros(1, device=dev).cpu().numpy()
        except Exception as exc:
            raise InvalidArgument(
                f"`device` {device!r} is not a usable torch device here ({_first_sentence(exc)}); "
                "pass 'cpu' or None"
            ) from None
        return dev
    import jax

    if not isinstance(device, str):
        if not isinstance(device, jax.Device):
            raise InvalidArgument(
                f"`device` must be a jax platform name ('cpu', 'gpu', 'tpu') or a jax.Device, "
                f"got {describe(device)}"
            )
        return device
    try:
        return jax.devices(device)[0]
    except Exception as exc:
        raise InvalidArgument(
            f"`device` {device!r} is not a jax platform here ({_first_sentence(exc)}); "
            "pass 'cpu' or None"
        ) from None


def adapter(framework: Any = "numpy", dtype: Any = "float64", device: Any = None) -> Adapter:
    """The :class:`Adapter` for a framework, a dtype and a device, validated up front.

    ``dtype`` is a format name (``"float64"``, ``"float32"``, ``"float16"``,
    ``"bfloat16"``), a NumPy dtype, or the framework's own dtype object
    (``torch.bfloat16``, ``jnp.float32``); ``"tf32"``, a format no array is
    stored in, is refused.
    """
    framework = check_choice(framework, "framework", FRAMEWORKS)
    prec = precision(dtype)
    module = _module(framework)
    dev = _device(framework, module, device)
    if framework == "jax" and prec.name == "float64":
        import jax

        if not jax.config.read("jax_enable_x64"):
            raise InvalidArgument(
                "`dtype` float64 with framework='jax' needs 64-bit JAX, which is off by default "
                "(jax would silently compute in float32): call "
                "jax.config.update('jax_enable_x64', True) first, or check float32"
            )
    out = Adapter(framework, prec, dev, module)
    out.native_dtype  # noqa: B018 - refuses bfloat16 for NumPy now, not later
    return out
