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

from kernelcheck import claims, verify
from kernelcheck._src.core.files import as_output_folder
from kernelcheck._src.core.rounding import ARRAY_FORMATS, PRECISIONS, feature_product_bound
from kernelcheck._src.core.validate import (
    as_array,
    check_computed,
    to_numpy,
)
from kernelcheck.errors import InvalidArgument, NumericalFailure
from kernelcheck.kernels import Linear
from kernelcheck.scaling import run_scaling


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


def _unbiased_report():
    X = np.random.default_rng(3).normal(size=(3, 2))
    return verify.unbiased(lambda rng: Linear().features(), Linear(), X, trials=4, seed=0)


def _scaling(out):
    return run_scaling(
        sizes=(8, 16, 32), d=2, num_features=4, repeats=1, forms=["parallel"], out=out
    )


EMPTY_ESSAY = claims.EssayReport(results=(), level="quick", duration=0.0)

#: Every public call that writes into a folder it is given: ``(call(folder), argument name)``.
#: Each checks the folder before it renders, measures or writes anything.
FOLDER_CALLS = {
    "as_output_folder": (lambda out: as_output_folder(out, "out"), "out"),
    "verify.write_report": (lambda out: verify.write_report(_unbiased_report(), out), "out_dir"),
    "claims.write_report": (lambda out: claims.write_report(EMPTY_ESSAY, out), "out_dir"),
    "scaling.run_scaling": (_scaling, "out"),
}

#: Folder paths no file system can take, each with what the refusal says; ``{tmp}`` is a
#: writable folder, so only the path's own fault can refuse it.
BAD_FOLDERS = {
    "NUL byte": ("{tmp}/a\0b", r"holds a NUL byte at position"),
    "lone surrogate": ("{tmp}/a\ud800", r"cannot be encoded as a file name"),
    "name too long": ("{tmp}/" + "a" * 300, r"File name too long"),
    "name too long below a new folder": (
        "{tmp}/new/" + "a" * 300,
        r"is 300 bytes long; the file system in .* takes names of at most",
    ),
    "path too long": ("{tmp}/" + "/".join(["abcdefgh"] * 600), r"File name too long"),
}


@pytest.mark.parametrize("bad", sorted(BAD_FOLDERS))
@pytest.mark.parametrize("call", sorted(FOLDER_CALLS))
def test_a_folder_no_file_system_can_take_is_refused_by_name_before_any_work(tmp_path, call, bad):
    fn, name = FOLDER_CALLS[call]
    template, message = BAD_FOLDERS[bad]
    folder = template.format(tmp=tmp_path)
    with pytest.raises(InvalidArgument, match=f"^`{name}` .*{message}"):
        fn(folder)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing written


@pytest.mark.parametrize("bad", ["NUL byte", "lone surrogate"])
def test_an_input_file_no_file_system_can_name_is_refused_by_name(tmp_path, bad):
    from kernelcheck._src.core.files import as_input_file

    template, message = BAD_FOLDERS[bad]
    with pytest.raises(InvalidArgument, match=f"^`file` .*{message}"):
        as_input_file(template.format(tmp=tmp_path))


def test_a_loop_of_links_is_named_as_one(tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(InvalidArgument, match=r"is a dangling link \(or a loop of links\)"):
        as_output_folder(tmp_path / "a" / "report")


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


def test_the_rounding_models_factor_composes_its_two_precisions():
    """Worst case: exactly Higham's gamma of the accumulation precision, then composed
    with the storage roundings; probabilistic: below the worst case once k > lambda^2,
    increasing in k, and 0 at k = 0."""
    from kernelcheck._src.core.rounding import RoundingModel, gamma, probabilistic_lambda

    f64, f32, f16 = PRECISIONS["float64"], PRECISIONS["float32"], PRECISIONS["float16"]
    for k in (1, 7, 1000):
        assert RoundingModel(f32, f32).gamma(k) == gamma(k, f32)
        mixed = RoundingModel(f32, f16, storage_ops=2).gamma(k)
        assert mixed == pytest.approx((1 + gamma(k, f32)) * (1 + gamma(2, f16)) - 1, rel=1e-12)
        assert mixed > gamma(k, f32) and mixed > gamma(2, f16)
    lam = probabilistic_lambda(1e6, 1e-9)
    prob = RoundingModel(f64, f64, lam=lam, failure=1e-9)
    assert prob.gamma(0) == 0.0
    ks = [10**j for j in range(2, 9)]
    values = [prob.gamma(k) for k in ks]
    assert values == sorted(values) and len(set(values)) == len(values)
    for k in ks:
        if k > 4 * lam**2:
            assert prob.gamma(k) < gamma(k, f64)


def test_probabilistic_lambda_keeps_the_union_bound_below_the_failure_probability():
    from kernelcheck._src.core.rounding import probabilistic_lambda

    for terms in (1, 10, 1e6, 1e12):
        for failure in (1e-3, 1e-9, 1e-15):
            lam = probabilistic_lambda(terms, failure)
            assert 2 * max(terms, 1) * np.exp(-(lam**2) / 2) <= failure
            assert lam < probabilistic_lambda(terms, failure / 10)
            assert lam < probabilistic_lambda(10 * max(terms, 1), failure)


def test_the_rounding_model_describes_itself():
    from kernelcheck._src.core.rounding import RoundingModel

    f32, f16 = PRECISIONS["float32"], PRECISIONS["float16"]
    assert RoundingModel(f32, f32).describe() == "accumulate in float32, worst case"
    text = RoundingModel(f32, f16, storage_ops=3, lam=5.0, failure=1e-9).describe()
    assert text.startswith("accumulate in float32, probabilistic (Higham-Mary, lambda = 5")
    assert "fails with probability <= 1e-09" in text
    assert text.endswith("; 3 roundings per term stored in float16")


def test_a_rounding_model_reads_as_its_coarser_precision():
    """unit_roundoff, eta and gamma of a mixed model: the coarser of its two formats for
    u and eta (the last rounding is to storage), its own factor for gamma; and the
    inner-product factor in that model's arithmetic."""
    from kernelcheck._src.core.rounding import (
        RoundingModel,
        eta,
        gamma,
        inner_product_factor,
        unit_roundoff,
    )

    f32, f16 = PRECISIONS["float32"], PRECISIONS["float16"]
    for acc, sto in ((f32, f16), (f16, f32)):
        model = RoundingModel(acc, sto, storage_ops=1)
        assert unit_roundoff(model) == f16.u
        assert eta(model) == f16.eta
        assert gamma(9, model) == model.gamma(9)
    model = RoundingModel(f16, f16)
    assert inner_product_factor(5, 0, model) == gamma(5, f16) * (1 + gamma(5, f16))
    assert inner_product_factor(5) == gamma(5) * (1 + gamma(5))


def test_a_matmul_bound_is_in_the_wider_operands_precision():
    from kernelcheck._src.core.rounding import matmul_error_bound

    A = np.random.default_rng(2).random((3, 4)).astype(np.float32).astype(np.float64)
    B = np.random.default_rng(3).random((4, 2)).astype(np.float32).astype(np.float64)
    wide = matmul_error_bound(A, B)  # the same numbers, all float64
    assert np.array_equal(matmul_error_bound(A, B.astype(np.float32)), wide)
    assert np.array_equal(matmul_error_bound(A.astype(np.float32), B), wide)
    narrow = matmul_error_bound(A.astype(np.float32), B.astype(np.float32))
    assert (narrow > wide).all()  # float32's u, not float64's


def _complex_results():
    torch = pytest.importorskip("torch")
    jnp = pytest.importorskip("jax.numpy")
    return {
        "torch": torch.ones(2, dtype=torch.complex64),
        "jax": jnp.ones(2, dtype=jnp.complex64),
        "numpy": np.ones(2, dtype=complex),
    }


def test_a_callable_returning_a_complex_tensor_of_any_framework_is_refused():
    from kernelcheck._src.core.calls import call_user

    for name, value in _complex_results().items():
        with pytest.raises(InvalidArgument, match=r"^`f` returned .*expected real numbers"):
            call_user(lambda v=value: v, "`f`")
        real = value.real if name != "torch" else value.real.contiguous()
        assert call_user(lambda v=real: v, "`f`") is real, name


def test_check_computed_says_a_complex_quantity_is_complex():
    with pytest.raises(NumericalFailure) as info:
        check_computed(np.array([1 + 1j]), "the error")
    assert str(info.value) == "the error is complex (complex128): no verdict is drawn from it"


def test_user_pairs_get_fresh_copies_of_their_rows_for_every_call():
    from kernelcheck._src.core.pairs import call_user_pairs

    X, Y = np.arange(6.0).reshape(3, 2), np.arange(8.0).reshape(4, 2) - 3
    X0, Y0 = X.copy(), Y.copy()

    def doubles_then_dots(x, y):
        x *= 2.0  # a row shared by later calls would double again
        y[0] = 0.0
        return float(x @ y)

    out = np.empty((3, 4))
    call_user_pairs(doubles_then_dots, "`f`", X, Y, out)
    ref = 2.0 * X[:, 1:] @ Y[:, 1:].T  # every call saw its own copies
    assert np.array_equal(out, ref)
    assert np.array_equal(X, X0) and np.array_equal(Y, Y0)


def test_user_pairs_take_real_numbers_and_refuse_the_rest_naming_the_call():
    from kernelcheck._src.core.pairs import call_user_pairs

    X = np.ones((2, 1))
    for value in (2, np.float32(2.0), np.array(2.0), True):
        out = np.empty((2, 2))
        call_user_pairs(lambda x, y, v=value: v, "`f`", X, X, out)
        assert (out == float(value)).all()
    for value in (np.complex128(1 + 1j), 1j, "1.5", b"1", [1.0], None):
        with pytest.raises(InvalidArgument, match=r"^`f` returned .*; expected a real number"):
            call_user_pairs(lambda x, y, v=value: v, "`f`", X, X, np.empty((2, 2)))
    with pytest.raises(InvalidArgument, match=r"^`f` raised ZeroDivisionError: "):
        call_user_pairs(lambda x, y: 1 / 0, "`f`", X, X, np.empty((2, 2)))


def test_user_pairs_wait_at_most_until_the_enclosing_deadline():
    import time

    from kernelcheck._src.core.deadline import user_deadline
    from kernelcheck._src.core.pairs import call_user_pairs

    X = np.ones((2, 1))
    out = np.empty((2, 2))
    with user_deadline(5.0):
        call_user_pairs(lambda x, y: float(x @ y), "`f`", X, X, out)
    assert (out == 1.0).all()
    t0 = time.monotonic()
    with pytest.raises(InvalidArgument, match=r"^`f`.*0\.2"), user_deadline(0.2):
        call_user_pairs(lambda x, y: time.sleep(3.0), "`f`", X, X, out)
    assert time.monotonic() - t0 < 2.0
