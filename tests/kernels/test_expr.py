"""The kernel expression language of ``kernelcheck kernel EXPR``.

Round trips compare the parser's kernel with the same kernel built by hand
through the algebra (structural equality, and the Gram matrices of the two
objects on random points), and with ``repr`` of kernel trees drawn by
Hypothesis.  The bad-input table checks the column every error points at.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given

from kernelcheck import kernels as K
from kernelcheck._src.kernels.expr import MAX_DEPTH, ExprError, parse_kernel, tokenize
from kernelcheck.errors import InvalidArgument
from kernelcheck.strategies import kernels as kernel_trees

ROUND_TRIPS = [
    ("linear", K.Linear()),
    ("Linear()", K.Linear()),
    ("const(2)", K.Constant(2.0)),
    ("constant(c=0.5)", K.Constant(0.5)),
    ("poly(2)", K.Polynomial(2)),
    ("polynomial(3, c=1)", K.Polynomial(3, c=1.0)),
    ("poly(degree=2, c=0.5)", K.Polynomial(2, c=0.5)),
    ("exponential", K.Exponential()),
    ("exponential(scale=0.5)", K.Exponential(scale=0.5)),
    ("gaussian(lengthscale=2)", K.Gaussian(lengthscale=2.0)),
    ("rbf", K.Gaussian()),
    ("laplacian", K.Laplacian()),
    ("laplacian(0.5)", K.Laplacian(lengthscale=0.5)),
    ("exp(linear)", K.exp(K.Linear())),
    ("exp(linear, order=3) + 0.5*poly(2)", K.exp(K.Linear(), order=3) + 0.5 * K.Polynomial(2)),
    ("exp(0.5 * linear, order=4)", K.exp(0.5 * K.Linear(), order=4)),
    ("linear**2", K.Linear() ** 2),
    ("linear ** 2 ** 1", K.Linear() ** 2),  # right-associative: 2 ** 1 = 2
    ("linear * poly(2, c=1)", K.Linear() * K.Polynomial(2, c=1.0)),
    ("2 * linear * 3", 2.0 * K.Linear() * 3.0),
    ("0.5 * 2 * linear", 1.0 * K.Linear()),  # numbers fold first
    ("linear / 4", 0.25 * K.Linear()),
    ("1 + linear", K.Constant(1.0) + K.Linear()),
    ("linear + 1", K.Linear() + K.Constant(1.0)),
    ("linear - poly(2)", K.Linear() + (-1.0) * K.Polynomial(2)),
    ("-linear", -1.0 * K.Linear()),
    ("(linear + const(1)) ** 2", (K.Linear() + K.Constant(1.0)) ** 2),
    ("linear + poly(2) * gaussian", K.Linear() + K.Polynomial(2) * K.Gaussian()),
    ("exp(linear, order=2,)", K.exp(K.Linear(), order=2)),
    ("  poly( 2 , c = 1e-1 )  ", K.Polynomial(2, c=0.1)),
]


@pytest.mark.parametrize(("text", "expected"), ROUND_TRIPS, ids=[t for t, _ in ROUND_TRIPS])
def test_parse_matches_the_algebra_built_by_hand(text, expected):
    parsed = parse_kernel(text)
    assert parsed == expected
    X = np.random.default_rng(1).normal(size=(7, 3)) * 0.5
    Y = np.random.default_rng(2).normal(size=(5, 3)) * 0.5
    np.testing.assert_array_equal(parsed(X, Y), expected(X, Y))


@given(kernel_trees(max_depth=3, finite=False))
def test_repr_of_any_kernel_tree_parses_back_to_the_same_tree(kernel):
    """repr(k) is an expression of the language: parsing it rebuilds k exactly."""
    assert parse_kernel(repr(kernel)) == kernel


def test_repr_of_every_example_kernel_parses_back(builtin_kernel):
    """The printed formula of every example kernel (tests/catalog.py) is an expression."""
    assert parse_kernel(repr(builtin_kernel)) == builtin_kernel


# (text, column the error points at, a fragment of the message)
BAD = [
    ("", 1, "empty"),
    ("   ", 4, "empty"),
    ("poly(2,, c=1)", 8, "expected an argument"),
    ("exp(linear,, order=3)", 12, "expected an argument"),
    ("2 ^ 3", 3, "powers are written **"),
    ("linear $", 8, "unexpected character '$'"),
    ("1.5e", 1, "malformed number"),
    ("2x", 1, "malformed number"),
    ("(linear", 8, "expected ')'"),
    ("linear)", 7, "expected an operator"),
    ("linear linear", 8, "expected an operator"),
    ("foo(2)", 1, "unknown name 'foo'"),
    ("linear + bar", 10, "unknown name 'bar'"),
    ("poly()", 1, "needs the argument 'degree'"),
    ("poly(2, d=3)", 9, "has no argument 'd'"),
    ("poly(2, degree=3)", 9, "given twice"),
    ("poly(degree=2, 3)", 16, "positional argument after a keyword"),
    ("poly(2, 0, 1)", 12, "takes 2 arguments"),
    ("poly(2.5)", 6, "must be an integer"),
    ("poly(-1)", 6, "`degree` must be >= 0"),
    ("poly(linear)", 6, "must be a number, got a kernel"),
    ("exp(2, order=1)", 5, "must be a kernel, got the number 2"),
    ("exp(linear, order=-1)", 13, "`order` must be >= 0"),
    ("exp(linear, order=1000)", 13, "`order` must be <="),
    ("gaussian(lengthscale=0)", 10, "`lengthscale` must be > 0"),
    ("linear ** 1.5", 8, "non-negative integer exponent"),
    ("linear ** -1", 8, "non-negative integer exponent"),
    ("linear ** linear", 8, "exponent must be a number"),
    ("2 / linear", 3, "division by a kernel"),
    ("linear / 0", 8, "division by zero"),
    ("2 ** 10000 * linear", 3, "overflowed"),
    ("2 * 3", 1, "is the number 6, not a kernel"),
    ("+linear", 1, "unary '+'"),
    ("linear +", 9, "expected a kernel or a number"),
    ("poly(2)(3)", 8, "expected an operator"),
    ("(" * (MAX_DEPTH + 1) + "linear" + ")" * (MAX_DEPTH + 1), MAX_DEPTH + 1, "nested deeper"),
    ("x" * 10_001, 10_001, "longer than"),
]


@pytest.mark.parametrize(("text", "column", "fragment"), BAD, ids=[b[0][:24] for b in BAD])
def test_bad_expression_points_at_the_column(text, column, fragment):
    with pytest.raises(ExprError) as info:
        parse_kernel(text)
    err = info.value
    assert err.column == column, str(err)
    assert fragment in str(err)
    assert "\n" not in str(err)  # one line, for the command line
    assert err.caret().splitlines()[1].index("^") == column - 1
    assert isinstance(err, InvalidArgument)


def test_tokenize_columns_and_kinds():
    text = "exp(linear, order=3) + 0.5*poly(2)"
    toks = tokenize(text)
    # Each token's text sits at its column in the source.
    for tok in toks[:-1]:
        assert text[tok.column - 1 : tok.column - 1 + len(tok.text)] == tok.text
    assert [t.kind for t in toks].count("NUMBER") == 3
    assert toks[-1].kind == "END" and toks[-1].column == len(text) + 1


def test_parser_never_evaluates_python():
    # Python that eval would run is refused: quotes start no token, names are unknown.
    with pytest.raises(ExprError, match="unexpected character"):
        parse_kernel("__import__('os').system('true')")
    with pytest.raises(ExprError, match="unknown name '__import__'"):
        parse_kernel("__import__(os)")


def test_non_string_is_refused():
    with pytest.raises(InvalidArgument, match="`expression` must be a string"):
        parse_kernel(3)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "name", "suggested"),
    [
        ("gausian", "gausian", "gaussian"),
        ("exp(Linar)", "Linar", "linear"),
        ("polynomal(2)", "polynomal", "polynomial"),
    ],
)
def test_an_unknown_name_close_to_a_known_one_is_proposed(text, name, suggested):
    with pytest.raises(
        InvalidArgument, match=rf"unknown name '{name}'; did you mean '{suggested}'\?"
    ):
        parse_kernel(text)


def test_an_unknown_name_far_from_every_known_one_gets_no_proposal():
    with pytest.raises(InvalidArgument) as info:
        parse_kernel("tanh(linear)")
    assert "unknown name 'tanh' (known: " in str(info.value)
    assert "did you mean" not in str(info.value)
