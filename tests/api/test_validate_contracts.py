"""The validation home's refusals say what they refused (issue 17): direct contract tests
of ``core/validate`` helpers whose message or branch no table of public calls reaches.

Each relates the message to the input (its path, index, value, count), so a message that
lost its subject, or a branch taken the wrong way round, fails here.
"""

from __future__ import annotations

import os
from fractions import Fraction

import numpy as np
import pytest

from kernelcheck._src.core.rounding import PRECISIONS, feature_product_bound
from kernelcheck._src.core.validate import (
    as_array,
    as_output_folder,
    check_computed,
    to_numpy,
)
from kernelcheck.errors import InvalidArgument, NumericalFailure


@pytest.mark.parametrize(
    "value, index, shown",
    [
        ([1.0, float("inf")], "(1,)", "inf"),
        ([[0.0, 1.0], [float("nan"), 2.0]], "(1, 0)", "nan"),
        ([[0.0, -float("inf")]], "(0, 1)", "-inf"),
    ],
)
def test_check_computed_names_the_first_non_finite_entry_and_its_value(value, index, shown):
    with pytest.raises(NumericalFailure) as info:
        check_computed(value, "the error")
    assert str(info.value).startswith(f"the error is {shown} at index {index}:")


def test_check_computed_of_a_non_finite_scalar_has_no_index():
    with pytest.raises(NumericalFailure, match=r"^the tolerance is inf: no verdict"):
        check_computed(float("inf"), "the tolerance")


@pytest.mark.parametrize("masked, word", [(1, "1 masked entry;"), (2, "2 masked entries;")])
def test_a_masked_array_is_refused_with_the_count_of_its_masked_entries(masked, word):
    mask = np.zeros(4, dtype=bool)
    mask[:masked] = True
    with pytest.raises(InvalidArgument, match=rf"^`x` is a masked array with {word}"):
        to_numpy(np.ma.masked_array(np.arange(4.0), mask=mask), "x")


def test_a_too_flat_array_is_described_in_the_refusal():
    with pytest.raises(InvalidArgument) as info:
        as_array(np.float64(2.5), "values", min_ndim=1)
    assert "got float64" in str(info.value) or "got array" in str(info.value)
    assert str(info.value).startswith("`values` must have at least 1 dimensions, got ")
    assert "None" not in str(info.value)


def test_a_tensor_is_detached_and_converted():
    torch = pytest.importorskip("torch")
    t = torch.tensor([[1.0, 2.0]], requires_grad=True)
    out = to_numpy(t * 3, "x")
    assert type(out) is np.ndarray and out.tolist() == [[3.0, 6.0]]


def test_an_output_folder_that_exists_is_accepted_and_a_file_refused(tmp_path):
    assert as_output_folder(tmp_path) == tmp_path
    assert as_output_folder(tmp_path / "new" / "deeper") == tmp_path / "new" / "deeper"
    f = tmp_path / "report.md"
    f.write_text("x")
    with pytest.raises(InvalidArgument, match=r"^`out` must be a folder, but .* is a file"):
        as_output_folder(f)


def test_an_output_folder_under_a_file_names_both_paths(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    target = f / "sub"
    with pytest.raises(InvalidArgument) as info:
        as_output_folder(target)
    assert str(info.value) == (
        f"`out` {str(target)!r} cannot be created: {str(f)!r} is not a folder"
    )


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_an_output_folder_that_cannot_be_written_names_the_path(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with pytest.raises(InvalidArgument) as info:
            as_output_folder(ro / "out")
        assert str(info.value).startswith(f"`out` {str(ro / 'out')!r}: cannot write into")
    finally:
        ro.chmod(0o700)


def test_an_output_folder_on_proc_names_the_path():
    if not os.path.isdir("/proc/self"):
        pytest.skip("no /proc")
    target = "/proc/self/kernelcheck-report"
    with pytest.raises(InvalidArgument) as info:
        as_output_folder(target)
    assert str(info.value).startswith(f"`out` {target!r}: cannot write into '/proc/self'")


def _finfo(name):
    if name == "bfloat16":
        ml_dtypes = pytest.importorskip("ml_dtypes")
        return ml_dtypes.finfo(ml_dtypes.bfloat16)
    return np.finfo(np.dtype(name))


@pytest.mark.parametrize("name", sorted(PRECISIONS))
def test_each_precision_agrees_with_the_formats_own_constants(name):
    """The error model's constants of a format against NumPy's (ml_dtypes' for bfloat16)."""
    p, fi = PRECISIONS[name], _finfo(name)
    assert p.u == float(fi.eps) / 2
    assert p.eta == float(fi.smallest_subnormal)
    assert p.tiny == float(fi.smallest_normal)
    assert p.max == float(fi.max)


ETA = float(np.nextafter(0.0, 1.0))


@pytest.mark.parametrize("ops", [1, 2, 3])
@pytest.mark.parametrize(
    "px, py",
    [
        ([0.5], [ETA]),
        ([0.75], [3 * ETA]),
        ([0.3], [7 * ETA]),
        ([0.5, 0.5], [ETA, ETA]),
        ([0.25, 0.75, 0.5], [5 * ETA, 3 * ETA, ETA]),
        ([1.0, 2.0**-1070], [2.0**-1070, 1.0]),
    ],
)
def test_the_feature_product_bound_covers_products_that_underflow(px, py, ops):
    """``|fl(PX @ PY.T) - PX PY^T|`` in exact fractions is within the bound, also where
    every product is subnormal (the underflow term carries the bound there)."""
    PX, PY = np.array([px]), np.array([py])
    computed = float((PX @ PY.T)[0, 0])
    exact = sum(Fraction(a) * Fraction(b) for a, b in zip(px, py))
    bound = float(feature_product_bound(PX, PY, ops)[0, 0])
    assert abs(Fraction(computed) - exact) <= Fraction(bound)
