"""The IEEE parameters of kernelcheck._src.core.rounding recomputed independently.

Each format's ``u``, smallest subnormal ``eta``, smallest normal and largest
finite number are derived here three ways that share nothing with the module:
NumPy's ``finfo``, ``math.ulp`` (float64), and a decoder of the format's bit
layout (sign, ``e`` exponent bits with bias ``2**(e-1) - 1``, ``f`` fraction
bits; IEEE 754-2019 sec. 3.4) whose bit patterns are cross-checked against
NumPy reinterpreting the same bits (bfloat16 is the upper half of a binary32
pattern).  All comparisons are exact: every quantity is a power of two or a
float that the format itself holds.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from kernelcheck._src.core.rounding import (
    ARRAY_FORMATS,
    PRECISIONS,
    PRODUCT_ONLY,
    ieee_format,
    ieee_formats,
    precision,
)
from kernelcheck.errors import InvalidArgument

#: (exponent bits, fraction bits) of each format, from IEEE 754-2019 Table 3.5,
#: the bfloat16 definition (binary32's 8 exponent bits, 7 fraction bits) and
#: TF32's (binary32's 8 exponent bits, 10 fraction bits).
LAYOUTS = {
    "float64": (11, 52),
    "float32": (8, 23),
    "float16": (5, 10),
    "bfloat16": (8, 7),
    "tf32": (8, 10),
    "tf32-nearest": (8, 10),
}


def decode(bits: int, e: int, f: int) -> float:
    """The value of a non-negative bit pattern of a binary format, in exact arithmetic."""
    bias = 2 ** (e - 1) - 1
    exponent, fraction = bits >> f, bits & (2**f - 1)
    assert exponent < 2**e - 1, "not a finite pattern"
    if exponent == 0:
        return math.ldexp(fraction, 1 - bias - f)
    return math.ldexp(2**f + fraction, exponent - bias - f)


def numpy_reads(bits: int, name: str) -> float:
    """NumPy's reading of the same bit pattern (bfloat16: the top half of a binary32;
    TF32: its top 19 bits)."""
    if name in ("bfloat16", "tf32", "tf32-nearest"):
        shift = 32 - 1 - sum(LAYOUTS[name])
        return float(np.array([bits << shift], dtype=np.uint32).view(np.float32)[0])
    width = {"float64": np.uint64, "float32": np.uint32, "float16": np.uint16}[name]
    return float(np.array([bits], dtype=width).view(name)[0])


def from_layout(name: str) -> dict[str, float]:
    e, f = LAYOUTS[name]
    one = (2 ** (e - 1) - 1) << f
    patterns = {
        "eta": 1,  # exponent 0, fraction 1
        "tiny": 1 << f,  # exponent 1, fraction 0
        "max": ((2**e - 2) << f) | (2**f - 1),
        "one": one,
        "above_one": one + 1,
    }
    values = {}
    for key, bits in patterns.items():
        values[key] = decode(bits, e, f)
        assert values[key] == numpy_reads(bits, name), (name, key)
    assert values["one"] == 1.0
    # u is half the gap between 1 and the next float (round to nearest)
    return {
        "u": (values["above_one"] - 1.0) / 2,
        "eta": values["eta"],
        "tiny": values["tiny"],
        "max": values["max"],
    }


def from_finfo(name: str) -> dict[str, float]:
    if name == "bfloat16":
        ml_dtypes = pytest.importorskip("ml_dtypes")
        fi = ml_dtypes.finfo(ml_dtypes.bfloat16)
    else:
        fi = np.finfo(name)
    return {
        "u": float(fi.eps) / 2,
        "eta": float(fi.smallest_subnormal),
        "tiny": float(fi.smallest_normal),
        "max": float(fi.max),
    }


def as_dict(p) -> dict[str, float]:
    return {"u": p.u, "eta": p.eta, "tiny": p.tiny, "max": p.max}


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_each_format_matches_its_bit_layout(name):
    built = ieee_formats()
    assert sorted(built) == sorted(LAYOUTS)
    assert built[name].name == name
    assert as_dict(built[name]) == from_layout(name)
    # the table built at import is the same table
    assert PRECISIONS[name] == built[name]
    assert precision(name) is PRECISIONS[name]


@pytest.mark.parametrize("name", sorted(set(LAYOUTS) - set(PRODUCT_ONLY)))
def test_each_format_matches_finfo(name):
    """(TF32 has no ``finfo``: no array library has the format.)"""
    assert as_dict(ieee_formats()[name]) == from_finfo(name)


def test_float64_matches_math_ulp():
    p = ieee_formats()["float64"]
    assert p.u == math.ulp(1.0) / 2
    assert p.eta == math.ulp(0.0)
    # the smallest normal is 2**52 steps of the smallest subnormal, the first with a full ulp
    assert p.tiny == math.ulp(0.0) * 2**52 and math.ulp(p.tiny) == math.ulp(0.0)
    assert math.isinf(p.max + math.ulp(p.max)) and math.isfinite(p.max)
    assert p.max == math.nextafter(math.inf, 0.0)


@pytest.mark.parametrize("name", ["float32", "float16"])
def test_one_ulp_past_max_overflows(name):
    p = ieee_formats()[name]
    top = np.array(p.max, dtype=name)
    assert float(top) == p.max
    with np.errstate(over="ignore"):
        assert np.isinf(np.nextafter(top, np.array(np.inf, dtype=name)))
        assert np.nextafter(np.array(0, dtype=name), top) == p.eta


def test_ieee_format_formulas_on_a_made_up_layout():
    """A format with 4 significand bits and exponents -6..7 (an 8-bit float, E4M3 without
    its NaN convention): its numbers from the bit decoder above, e = 4, f = 3."""
    e, f = 4, 3
    p = ieee_format("e4m3", f + 1, 2 - 2 ** (e - 1), 2 ** (e - 1) - 1)
    assert p.name == "e4m3"
    one = (2 ** (e - 1) - 1) << f
    assert p.u == (decode(one + 1, e, f) - 1.0) / 2
    assert p.eta == decode(1, e, f)
    assert p.tiny == decode(1 << f, e, f)
    assert p.max == decode(((2**e - 2) << f) | (2**f - 1), e, f)


def test_a_dtype_object_read_by_its_name():
    """An object NumPy cannot read as a dtype is read by its ``__name__``, else by
    ``str``, its last dotted part, in any case (as ``jnp.bfloat16`` or ``torch.float16``)."""

    class Named:
        def __init__(self, name):
            self.__name__ = name

        def __str__(self):
            return "not.a.float"

    class Printed:
        def __str__(self):
            return "Mylib.Dtypes.FLOAT16"

    for obj in (Named("mylib.dtypes.bfloat16"), Named("BFloat16")):
        with pytest.raises(TypeError):
            np.dtype(obj)
        assert precision(obj) is PRECISIONS["bfloat16"]
    assert precision(Printed()) is PRECISIONS["float16"]
    # an empty __name__ falls back to str(): "not.a.float" is no known format
    with pytest.raises(InvalidArgument, match=r"`dtype` must be one of float64, float32"):
        precision(Named(""))
    with pytest.raises(InvalidArgument, match="got"):
        precision(Named("mylib.bfloat16.float128"))


def _finfo(name):
    if name == "bfloat16":
        ml_dtypes = pytest.importorskip("ml_dtypes")
        return ml_dtypes.finfo(ml_dtypes.bfloat16)
    return np.finfo(np.dtype(name))


@pytest.mark.parametrize("name", sorted(ARRAY_FORMATS))
def test_each_precision_agrees_with_the_formats_own_constants(name):
    """The error model's constants of a format against NumPy's (ml_dtypes' for bfloat16)."""
    p, fi = PRECISIONS[name], _finfo(name)
    assert p.u == float(fi.eps) / 2
    assert p.eta == float(fi.smallest_subnormal)
    assert p.tiny == float(fi.smallest_normal)
    assert p.max == float(fi.max)


def _spellings():
    torch = pytest.importorskip("torch")
    jnp = pytest.importorskip("jax.numpy")
    return [
        ("float64", "float64"),
        ("FLOAT32", "float32"),
        ("Float16", "float16"),
        ("bfloat16", "bfloat16"),
        (np.float32, "float32"),
        (np.dtype("float16"), "float16"),
        (torch.float32, "float32"),
        (torch.bfloat16, "bfloat16"),
        (torch.float16, "float16"),
        (jnp.bfloat16, "bfloat16"),
        (jnp.float32, "float32"),
    ]


def test_every_spelling_of_a_format_gives_its_precision():
    from kernelcheck._src.core.rounding import precision, unit_roundoff

    for spelling, name in _spellings():
        assert precision(spelling) is PRECISIONS[name], spelling
        assert unit_roundoff(spelling) == PRECISIONS[name].u, spelling


@pytest.mark.parametrize("bad", ["int32", np.int64, "float8", 3])
def test_a_format_the_error_model_does_not_know_is_refused(bad):
    from kernelcheck._src.core.rounding import precision

    with pytest.raises(InvalidArgument, match=r"^`dtype` must be one of float64, float32"):
        precision(bad)
