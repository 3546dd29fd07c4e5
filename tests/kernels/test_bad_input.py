"""Bad input to the kernels and exact feature maps is refused by name (claims C4-C9).

One table, a row a refusal: every kernel constructor, the algebra, ``k(X, Y)``,
``error_bound``, ``gram_mp``, ``features``, ``feature_dim`` and the monomial
maps, each raising ``InvalidArgument`` (or ``InfiniteFeatureSpace``) whose
message opens with the argument in backticks, or names the size an
intermediate would need, and describes the value.  Python operators follow
Python's protocol (``TypeError``).  Accepted inputs are in
``test_accepted_inputs.py``, values at the ends of the float range in
``test_extreme_values.py``.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

from kernelcheck.errors import InfiniteFeatureSpace, InvalidArgument
from kernelcheck.features import ExactFeatureMap, weighted_monomials
from kernelcheck.kernels import (
    Constant,
    Exp,
    Exponential,
    FunctionKernel,
    Gaussian,
    Laplacian,
    Linear,
    Polynomial,
    Power,
    Product,
    Scaled,
    Sum,
    exp,
    kernel_from_function,
    monomial_dim,
    unweighted_monomials,
)
from tests.inputs import assert_refused, point_set_rows

IA = InvalidArgument  # the error most rows expect
X3 = np.random.default_rng(11).normal(size=(3, 2))


def _boom(*args):
    raise ZeroDivisionError("boom")


X = np.random.default_rng(3).normal(size=(4, 2))
HUGE = np.broadcast_to(np.ones((1, 1)), (100_000, 1))  # no memory behind it


# ---------------------------------------------------------------------------
# Bad-input table: (id, call, error, message regex from the start)
# ---------------------------------------------------------------------------


BAD_CALLS = (
    point_set_rows("gram", lambda Z: Gaussian()(Z))
    + point_set_rows("error_bound", lambda Z: Polynomial(2).error_bound(Z))
    + point_set_rows("gram_mp", lambda Z: Linear().gram_mp(Z, dps=20))
    + point_set_rows("features", lambda Z: Polynomial(2).features()(Z))
    + point_set_rows("unweighted", lambda Z: unweighted_monomials(Z, 2))
    + [
        (
            "gram-Y-dim",
            lambda: Linear()(X, np.ones((2, 3))),
            InvalidArgument,
            r"^`Y` must have the same number of columns as `X` \(d = 2\), "
            r"got array of shape \(2, 3\)",
        ),
        (
            "gram-Y-nan",
            lambda: Linear()(X, np.full((2, 2), np.nan)),
            InvalidArgument,
            r"^`Y` must be finite",
        ),
        (
            "gram-Y-1d",
            lambda: Linear()(X, np.ones(2)),
            InvalidArgument,
            r"^`Y` must be a 2-d array",
        ),
        (
            "gram-huge",
            lambda: Linear()(HUGE, HUGE),
            InvalidArgument,
            r"^the Gram block of Linear\(\) would need 10000000000 entries \(74\.5 GiB\); "
            r"the limit is 2147483648 entries",
        ),
        (
            "error-bound-huge",
            lambda: Gaussian().error_bound(HUGE, HUGE),
            InvalidArgument,
            r"^the Gram block of Gaussian\(\) would need 10000000000 entries",
        ),
        (
            "features-huge",
            lambda: exp(Linear(), order=20).features()(np.ones((2, 50))),
            InvalidArgument,
            r"^the feature matrix of \(exp\(Linear\(\), order=20\)\)\.features"
            r"\(form='symmetric'\) for X of shape \(2, 50\) would need",
        ),
        (
            "tensor-huge",
            lambda: (Linear() ** 30).features("tensor")(np.ones((2, 50))),
            InvalidArgument,
            r"^the feature matrix of \(Linear\(\) \*\* 30\)",
        ),
        (
            "unweighted-huge",
            lambda: unweighted_monomials(np.ones((2, 50)), 30),
            InvalidArgument,
            r"^the monomial matrix would need 11089265668550566828760 entries",
        ),
        (
            "weighted-huge",
            lambda: weighted_monomials(np.ones((2, 50)), 30),
            InvalidArgument,
            r"^the monomial feature matrix would need 11089265668550566828760 entries",
        ),
        (
            "gram_mp-dps-low",
            lambda: Linear().gram_mp(X, dps=5),
            InvalidArgument,
            r"^`dps` must be >= 15, got 5",
        ),
        (
            "gram_mp-dps-float",
            lambda: Linear().gram_mp(X, dps=30.0),
            InvalidArgument,
            r"^`dps` must be an integer",
        ),
        (
            "gram_mp-function",
            lambda: kernel_from_function(lambda x, y: 1.0).gram_mp(X),
            InvalidArgument,
            r"^`kernel` kernel_from_function\(<lambda>\) cannot be evaluated in "
            r"mpmath; pass mp_function= to kernel_from_function",
        ),
        # constructors
        (
            "constant-nan",
            lambda: Constant(float("nan")),
            InvalidArgument,
            r"^`c` must be finite, got nan",
        ),
        (
            "constant-str",
            lambda: Constant("1"),
            InvalidArgument,
            r"^`c` must be a real number, got str '1'",
        ),
        (
            "constant-bool",
            lambda: Constant(True),
            InvalidArgument,
            r"^`c` must be a real number, got bool True",
        ),
        (
            "polynomial-degree-neg",
            lambda: Polynomial(-1),
            InvalidArgument,
            r"^`degree` must be >= 0, got -1",
        ),
        (
            "polynomial-degree-float",
            lambda: Polynomial(2.0),
            InvalidArgument,
            r"^`degree` must be an integer \(got the float 2\.0; pass int\(2\.0\)\)",
        ),
        (
            "polynomial-degree-big",
            lambda: Polynomial(65),
            InvalidArgument,
            r"^`degree` must be <= 64, got 65",
        ),
        (
            "polynomial-c-neg",
            lambda: Polynomial(2, c=-1.0),
            InvalidArgument,
            r"^`c` must be >= 0, got -1\.0",
        ),
        (
            "exponential-scale-zero",
            lambda: Exponential(0.0),
            InvalidArgument,
            r"^`scale` must be > 0, got 0\.0",
        ),
        (
            "exponential-scale-inf",
            lambda: Exponential(float("inf")),
            InvalidArgument,
            r"^`scale` must be finite, got inf",
        ),
        (
            "gaussian-lengthscale",
            lambda: Gaussian(-1.0),
            InvalidArgument,
            r"^`lengthscale` must be > 0, got -1\.0",
        ),
        (
            "laplacian-lengthscale",
            lambda: Laplacian("1"),
            InvalidArgument,
            r"^`lengthscale` must be a real number, got str '1'",
        ),
        (
            "function-not-callable",
            lambda: kernel_from_function(3),
            InvalidArgument,
            r"^`f` must be callable, got int 3",
        ),
        (
            "function-mp-not-callable",
            lambda: kernel_from_function(lambda x, y: 1.0, mp_function="mp"),
            InvalidArgument,
            r"^`mp_function` must be callable, got str 'mp'",
        ),
        (
            "function-name",
            lambda: kernel_from_function(lambda x, y: 1.0, name=3),
            InvalidArgument,
            r"^`name` must be a string, got int 3",
        ),
        # algebra
        (
            "sum-str",
            lambda: Linear() + "a",
            InvalidArgument,
            r"^`other` must be a Kernel or a real number, got str 'a'",
        ),
        (
            "radd-bool",
            lambda: True + Linear(),
            InvalidArgument,
            r"^`other` must be a Kernel or a real number, got bool True",
        ),
        (
            "power-float",
            lambda: Linear() ** 0.5,
            InvalidArgument,
            r"^`m` must be an integer, got float 0\.5",
        ),
        ("power-neg", lambda: Linear() ** -1, InvalidArgument, r"^`m` must be >= 0, got -1"),
        ("power-big", lambda: Linear() ** 65, InvalidArgument, r"^`m` must be <= 64, got 65"),
        (
            "exp-order-neg",
            lambda: exp(Linear(), order=-1),
            InvalidArgument,
            r"^`order` must be >= 0, got -1",
        ),
        (
            "exp-order-float",
            lambda: exp(Linear(), order=2.5),
            InvalidArgument,
            r"^`order` must be an integer",
        ),
        (
            "exp-kernel-str",
            lambda: exp("k"),
            InvalidArgument,
            r"^`kernel` must be a Kernel or a real number, got str 'k'",
        ),
        # feature maps
        (
            "features-form",
            lambda: Linear().features("dense"),
            InvalidArgument,
            r"^`form` must be one of 'symmetric', 'tensor'; got 'dense'",
        ),
        (
            "feature_dim-form",
            lambda: Linear().feature_dim(3, form=None),
            InvalidArgument,
            r"^`form` must be one of 'symmetric', 'tensor'; got None",
        ),
        (
            "feature_dim-d",
            lambda: Polynomial(2).feature_dim(0),
            InvalidArgument,
            r"^`d` must be >= 1, got 0",
        ),
        (
            "output_dim-d",
            lambda: Polynomial(2).features().output_dim(1.0),
            InvalidArgument,
            r"^`d` must be an integer",
        ),
        (
            "features-exponential",
            lambda: Exponential(0.5).features(),
            InfiniteFeatureSpace,
            r"^Exponential\(scale=0\.5\) has an infinite feature space \(C9\)\. Truncate its "
            r"Taylor series with kernelcheck\.kernels\.exp\(0\.5 \* Linear\(\), order=M\) "
            r"\(C12\), or sample random features with "
            r"kernelcheck\.features\.PositiveRandomFeatures\(dim, num_features, "
            r"seed=\.\.\., scale=0\.5\) \(C13\)",
        ),
        (
            "features-exponential-1",
            lambda: Exponential().feature_dim(2),
            InfiniteFeatureSpace,
            r"^Exponential\(\) has an infinite feature space \(C9\)\. Truncate its Taylor series "
            r"with kernelcheck\.kernels\.exp\(Linear\(\), order=M\)",
        ),
        (
            "features-gaussian",
            lambda: (Linear() + Gaussian(2.0)).features(),
            InfiniteFeatureSpace,
            r"^Gaussian\(lengthscale=2\.0\) has an infinite feature space; sample random Fourier "
            r"features for it, or use kernelcheck\.mercer_features on a finite point set \(C6\)",
        ),
        (
            "features-exp",
            lambda: (2.0 * exp(Linear())).features(),
            InfiniteFeatureSpace,
            r"^exp\(Linear\(\)\) has an infinite feature space \(C9\): phi\(x\) = \[1, phi_k\(x\), "
            r"phi_k\(x\)\^\(2\)/sqrt\(2!\), \.\.\.\]\. Truncate it with exp\(k, order=M\) \(C12\), "
            r"or sample random features \(C13\)",
        ),
        (
            "features-exp-order-of-infinite",
            lambda: exp(Laplacian(), order=2).features(),
            InfiniteFeatureSpace,
            r"^Laplacian\(\) has an infinite feature space",
        ),
        (
            "features-function",
            lambda: kernel_from_function(lambda x, y: 1.0).features(),
            InfiniteFeatureSpace,
            r"^kernel_from_function\(<lambda>\) is a user function with no known feature map; "
            r"kernelcheck\.mercer_features builds one on a finite point set \(Theorem 2, C6\)",
        ),
        (
            "features-negative-constant",
            lambda: (Linear() + Constant(-1.0)).features(),
            InfiniteFeatureSpace,
            r"^Constant\(-1\.0\) has a negative value, so it is not a kernel "
            r"and has no real feature map \(Theorem 1, C5\)",
        ),
        (
            "features-negative-scale",
            lambda: (-2.0 * Linear()).features(),
            InfiniteFeatureSpace,
            r"^\(-2\.0\) \* Linear\(\) scales by a negative number: it is not a kernel and has no "
            r"real feature map \(Theorem 1, C5\)",
        ),
        (
            "features-negative-scale-product",
            lambda: (Linear() * (-1.0 * Gaussian())).feature_dim(2),
            InfiniteFeatureSpace,
            r"^\(-1\.0\) \* Gaussian\(\) scales by a negative number",
        ),
        (
            "features-scaled-infinite",
            lambda: (3.0 * Laplacian()).features(),
            InfiniteFeatureSpace,
            r"^Laplacian\(\) has an infinite feature space",
        ),
        # user functions that misbehave
        (
            "function-raises",
            lambda: kernel_from_function(lambda x, y: 1 / 0)(X),
            InvalidArgument,
            r"^`f` \(<lambda>\) raised ZeroDivisionError: division by zero",
        ),
        (
            "function-nan",
            lambda: kernel_from_function(lambda x, y: np.nan, name="nanf")(X),
            InvalidArgument,
            r"^`f` \(nanf\) returned a non-finite value .*nan.* at entry \(0, 0\)",
        ),
        (
            "function-str",
            lambda: kernel_from_function(lambda x, y: "a")(X),
            InvalidArgument,
            r"^`f` \(<lambda>\) returned str .a.; expected a real number",
        ),
        (
            "function-vec-shape",
            lambda: kernel_from_function(lambda a, b: np.ones(3), vectorized=True)(X),
            InvalidArgument,
            r"^`f` \(<lambda>\) with vectorized=True must broadcast inputs of shapes "
            r"\(4, 1, d\) and \(1, 4, d\) to a result of shape \(4, 4\), got array of shape \(3,\)",
        ),
        (
            "function-vec-complex",
            lambda: kernel_from_function(lambda a, b: (a * b).sum(-1) + 1j, vectorized=True)(X),
            InvalidArgument,
            r"^`f` \(<lambda>\) returned array of shape \(4, 4\) and dtype complex128",
        ),
        (
            "function-vec-none",
            lambda: kernel_from_function(lambda a, b: None, vectorized=True)(X),
            InvalidArgument,
            r"^`f` \(<lambda>\) returned array of shape \(\) and dtype object; expected real",
        ),
        (
            "function-vec-inf",
            lambda: kernel_from_function(lambda a, b: np.full((4, 4), np.inf), vectorized=True)(X),
            InvalidArgument,
            r"^`f` \(<lambda>\) returned a non-finite value",
        ),
        (
            "function-raises-invalid",
            lambda: kernel_from_function(lambda x, y: Constant("x"))(X),
            InvalidArgument,
            r"^`c` must be a real number",
        ),
        (
            "function-mp-raises",
            lambda: kernel_from_function(lambda x, y: 1.0, mp_function=lambda x, y: 1 / 0).gram_mp(
                X
            ),
            InvalidArgument,
            r"^`mp_function` of kernel_from_function\(<lambda>\) raised "
            r"ZeroDivisionError: division by zero",
        ),
        (
            "function-error-bound",
            lambda: kernel_from_function(lambda x, y: 1.0).error_bound(X),
            InvalidArgument,
            r"^`kernel` kernel_from_function\(<lambda>\) has no rounding-error "
            r"model; kernelcheck cannot bound its Gram entries \(pass error_bound= to "
            r"kernel_from_function, compose only built-in nodes, or judge with a tolerance of "
            r"your own\)",
        ),
        (
            "function-in-sum-error-bound",
            lambda: (Linear() + kernel_from_function(lambda x, y: 1.0)).error_bound(X),
            InvalidArgument,
            r"^`kernel` kernel_from_function",
        ),
        # monomials
        (
            "monomial_dim-d",
            lambda: monomial_dim(0, 2),
            InvalidArgument,
            r"^`d` must be >= 1, got 0",
        ),
        (
            "monomial_dim-m",
            lambda: monomial_dim(2, -1),
            InvalidArgument,
            r"^`m` must be >= 0, got -1",
        ),
        (
            "unweighted-degree",
            lambda: unweighted_monomials(X, -1),
            InvalidArgument,
            r"^`degree` must be >= 0, got -1",
        ),
        (
            "weighted-Z",
            lambda: weighted_monomials(np.ones(3), 2),
            InvalidArgument,
            r"^`Z` must be a 2-d array",
        ),
        (
            "weighted-Z-nan",
            lambda: weighted_monomials([[np.nan]], 2),
            InvalidArgument,
            r"^`Z` must be finite",
        ),
        (
            "weighted-m",
            lambda: weighted_monomials(X, 1.5),
            InvalidArgument,
            r"^`m` must be an integer",
        ),
        (
            "array-times-kernel",
            lambda: np.array([2.0, 3.0]) * Linear(),
            InvalidArgument,
            r"^`other` must be a real number or a Kernel, got array of shape \(2,\)",
        ),
        (
            "kernel-times-array",
            lambda: Linear() * np.array([2.0, 3.0]),
            InvalidArgument,
            r"^`other` must be a real number or a Kernel, got array of shape \(2,\)",
        ),
        (
            "deep-sum",
            lambda: functools.reduce(lambda a, b: a + b, [Linear()] * 300),
            InvalidArgument,
            r"^`left` is nested 100 combinators deep: the kernel expression would be 101 deep",
        ),
        (
            "deep-product",
            lambda: functools.reduce(lambda a, b: b * a, [Linear()] * 300),
            InvalidArgument,
            r"^`right` is nested 100 combinators deep",
        ),
        (
            "deep-exp",
            lambda: functools.reduce(lambda a, _: exp(a, order=1), range(200), Linear()),
            InvalidArgument,
            r"^`kernel` is nested 100 combinators deep",
        ),
    ]
)


def test_python_operators_refuse_non_numbers_with_type_error():
    """``k * "a"`` follows Python's operator protocol: NotImplemented, then TypeError."""
    with pytest.raises(TypeError):
        Linear() * "a"
    with pytest.raises(TypeError):
        "a" * Linear()
    with pytest.raises(TypeError):
        True * Linear()


def _fk(**kw):
    return FunctionKernel(lambda x, y: float(x @ y), **kw)


def _mp(value):
    return FunctionKernel(lambda x, y: 1.0, mp_function=lambda x, y: value)


# ---------------------------------------------------------------------------
# Bad-input tables: (id, call, error, message regex from the start)
# ---------------------------------------------------------------------------

KERNEL_NODE_BAD = [
    ("sum-str", lambda: Sum(Linear(), "a"), IA, r"^`right` must be a Kernel or a real"),
    ("sum-bool", lambda: Sum(True, Linear()), IA, r"^`left` must be a Kernel or a"),
    ("sum-array", lambda: Sum(np.ones(2), Linear()), IA, r"^`left` must be a Kernel"),
    ("sum-complex", lambda: Sum(1j, Linear()), IA, r"^`left` must be a Kernel"),
    ("sum-nan", lambda: Sum(math.nan, Linear()), IA, r"^`left` must be finite, got"),
    ("sum-inf", lambda: Sum(Linear(), math.inf), IA, r"^`right` must be finite, got"),
    ("add-nan", lambda: Linear() + math.nan, IA, r"^`other` must be finite, got nan"),
    ("scaled-str", lambda: Scaled("a", Linear()), IA, r"^`c` must be a real number"),
    ("scaled-nan", lambda: Scaled(math.nan, Linear()), IA, r"^`c` must be finite"),
    ("scaled-array", lambda: Scaled(np.ones(2), Linear()), IA, r"^`c` must be a real"),
    ("scaled-kernel", lambda: Scaled(2.0, "k"), IA, r"^`kernel` must be a Kernel or"),
    ("product-none", lambda: Product(Linear(), None), IA, r"^`right` must be a Kernel"),
    ("product-nan", lambda: Product(Linear(), math.nan), IA, r"^`right` must be fin"),
    ("power-neg", lambda: Power(Linear(), -1), IA, r"^`m` must be >= 0, got -1"),
    ("power-float", lambda: Power(Linear(), 2.0), IA, r"^`m` must be an integer \(got"),
    ("power-bool", lambda: Power(Linear(), True), IA, r"^`m` must be an integer, got b"),
    ("power-huge", lambda: Power(Linear(), 10**6), IA, r"^`m` must be <= 64, got 1000"),
    ("power-kernel", lambda: Power("k", 2), IA, r"^`kernel` must be a Kernel or a"),
    ("exp-neg", lambda: Exp(Linear(), -1), IA, r"^`order` must be >= 0, got -1"),
    ("exp-float", lambda: Exp(Linear(), 1.5), IA, r"^`order` must be an integer"),
    ("exp-huge", lambda: Exp(Linear(), 10**9), IA, r"^`order` must be <= 64"),
    ("exp-none", lambda: Exp(None), IA, r"^`kernel` must be a Kernel or a real"),
    ("fk-not-callable", lambda: FunctionKernel(5), IA, r"^`f` must be callable, got"),
    ("fk-mp", lambda: _fk(mp_function=5), IA, r"^`mp_function` must be callable"),
    ("fk-name", lambda: _fk(name=5), IA, r"^`name` must be a string, got int 5"),
    (
        "fk-vectorized",
        lambda: _fk(vectorized="no"),
        IA,
        r"^`vectorized` must be True or False, got str 'no'",
    ),
    ("fk-raises", lambda: FunctionKernel(_boom)(X3), IA, r"^`f` \(_boom\) raised Zero"),
    (
        "fk-shape",
        lambda: FunctionKernel(lambda a, b: np.ones(3), vectorized=True)(X3),
        IA,
        r"^`f` \(<lambda>\) with vectorized=True must broadcast",
    ),
    (
        "fk-complex",
        lambda: FunctionKernel(lambda x, y: 1j)(X3),
        IA,
        r"^`f` \(<lambda>\) returned complex .*; expected a real number",
    ),
    (
        "fk-strings",
        lambda: FunctionKernel(lambda a, b: np.full((3, 3), "a"), vectorized=True)(X3),
        IA,
        r"^`f` \(<lambda>\) returned array of shape \(3, 3\) and dtype <U1; expected real",
    ),
    (
        "fk-nan",
        lambda: FunctionKernel(lambda x, y: math.nan)(X3),
        IA,
        r"^`f` \(<lambda>\) returned a non-finite value",
    ),
    (
        "fk-X",
        lambda: _fk()(np.array([[1.0, np.inf]])),
        IA,
        r"^`X` must be finite",
    ),
    (
        "fk-mp-raises",
        lambda: FunctionKernel(lambda x, y: 1.0, mp_function=_boom).gram_mp(X3, dps=20),
        IA,
        r"^`mp_function` of kernel_from_function\(<lambda>\) raised ZeroDivisionError",
    ),
    (
        "fk-mp-nan",
        lambda: _mp(math.nan).gram_mp(X3, dps=20),
        IA,
        r"^`mp_function` of kernel_from_function\(<lambda>\) returned a non-finite value nan "
        r"at entry \(0, 0\)",
    ),
    (
        "fk-mp-inf",
        lambda: _mp(-math.inf).gram_mp(X3, dps=20),
        IA,
        r"^`mp_function` .* returned a non-finite value -inf",
    ),
    (
        "fk-error-bound",
        lambda: _fk().error_bound(X3),
        IA,
        r"^`kernel` kernel_from_function\(<lambda>\) has no rounding-error model",
    ),
    (
        "fk-error-bound-negative",
        lambda: FunctionKernel(lambda x, y: 1.0, error_bound=-1.0),
        IA,
        r"^`error_bound` must be >= 0",
    ),
    (
        "fk-error-bound-nan",
        lambda: FunctionKernel(lambda x, y: 1.0, error_bound=math.nan),
        IA,
        r"^`error_bound` must be",
    ),
    (
        "fk-error-bound-shape",
        lambda: FunctionKernel(lambda x, y: 1.0, error_bound=lambda A, B: np.ones(2)).error_bound(
            X3
        ),
        IA,
        r"^`error_bound` of kernel_from_function\(<lambda>\) must return a real array of shape",
    ),
    (
        "fk-blocks-and-vectorized",
        lambda: FunctionKernel(lambda x, y: 1.0, vectorized=True, blocks=True),
        IA,
        r"^`vectorized` and `blocks` exclude each other",
    ),
    (
        "efm-kernel",
        lambda: ExactFeatureMap(5),
        IA,
        r"^`kernel` must be a kernelcheck Kernel, got int 5",
    ),
    (
        "efm-infinite",
        lambda: ExactFeatureMap(Exponential()),
        InfiniteFeatureSpace,
        r"^Exponential\(\) has an infinite feature space",
    ),
    (
        "efm-form",
        lambda: ExactFeatureMap(Linear(), "diagonal"),
        IA,
        r"^`form` must be one of 'symmetric', 'tensor'; got 'diagonal'",
    ),
    (
        "efm-form-array",
        lambda: ExactFeatureMap(Linear(), np.array(["a", "b"])),
        IA,
        r"^`form` must be one of 'symmetric', 'tensor'; got array",
    ),
    (
        "efm-form-list",
        lambda: ExactFeatureMap(Linear(), ["tensor"]),
        IA,
        r"^`form` must be one of",
    ),
]


@pytest.mark.parametrize(
    "call, error, message", [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS]
)
def test_bad_input_table(call, error, message):
    """Each row raises the expected clean error, its message read from the start."""
    assert_refused(call, error, message)


@pytest.mark.parametrize(
    "call, error, message", [c[1:] for c in KERNEL_NODE_BAD], ids=[c[0] for c in KERNEL_NODE_BAD]
)
def test_kernel_nodes_bad_input(call, error, message):
    """The kernel nodes built directly (``Sum``, ``Scaled``, ``Product``, ``Power``,
    ``Exp``, ``FunctionKernel``, ``ExactFeatureMap``): each row refused by name."""
    assert_refused(call, error, message)
