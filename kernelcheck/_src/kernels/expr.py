"""A small, safe expression language for kernels (used by ``kernelcheck kernel EXPR``).

The text is read by a hand-written tokenizer and a recursive-descent parser,
never by :func:`eval`; the only names it knows are the kernel leaves of the
catalogue (:data:`kernelcheck._src.kernels.catalog.LEAVES`), ``exp`` and the
operations of the algebra.

Grammar (``*`` and ``+`` bind as in Python, ``**`` is right-associative and
binds tighter than a unary minus)::

    expr    := term (("+" | "-") term)*
    term    := unary (("*" | "/") unary)*
    unary   := "-" unary | power
    power   := atom ("**" unary)?
    atom    := NUMBER | NAME | NAME "(" [args] ")" | "(" expr ")"
    args    := arg ("," arg)* [","]
    arg     := NAME "=" expr | expr

Names: every spelling of a catalogue row, called with the row's constructor
arguments (``poly(2, c=1)``, ``polynomial(degree=2)``; :func:`language_names`
lists them all), and ``exp(k, order=None)`` for ``kernels.exp(k, order=order)``
(C9, C12).  A name whose arguments all have defaults may be written without
parentheses (``linear``, ``gaussian``).

Arithmetic: ``k1 + k2``, ``k1 * k2``, ``c * k``, ``k / c``, ``k ** m``, ``c + k``
(a number added to a kernel is the constant kernel ``const(c)``), ``k1 - k2``
(``k1 + (-1) * k2``: the algebra decides whether it accepts the negative
weight).  Arithmetic between plain numbers is done at parse time
(``0.5 * 2 * linear``).  Every error is an :class:`ExprError` that gives the
1-based column of the offending token.

Examples
--------
>>> from kernelcheck._src.kernels.expr import ExprError, parse_kernel
>>> parse_kernel("exp(linear, order=3) + 0.5*poly(2)")
exp(Linear(), order=3) + 0.5 * Polynomial(2)
>>> try:
...     parse_kernel("poly(2,, c=1)")
... except ExprError as exc:
...     print(exc.column, exc.reason)
8 expected an argument, got ','
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from kernelcheck._src.core.suggest import did_you_mean
from kernelcheck._src.kernels.catalog import LEAVES, REQUIRED, Leaf
from kernelcheck._src.kernels.combinators import exp
from kernelcheck._src.kernels.leaves import Constant
from kernelcheck.errors import InvalidArgument

__all__ = [
    "ExprError",
    "Token",
    "tokenize",
    "parse_kernel",
    "language_names",
    "FUNCTIONS",
    "MAX_LENGTH",
    "MAX_DEPTH",
]

#: Longest expression accepted, in characters.
MAX_LENGTH = 10_000
#: Deepest nesting of parentheses / unary minus / powers accepted.
MAX_DEPTH = 64


class ExprError(InvalidArgument):
    """A kernel expression that cannot be read or built; says where (1-based column).

    Attributes
    ----------
    column : int
        1-based column of the offending token in :attr:`text`.
    text : str
        The whole expression.
    reason : str
        What went wrong, without the position.
    """

    def __init__(self, reason: str, column: int, text: str):
        self.reason = reason
        self.column = column
        self.text = text
        shown = text if len(text) <= 80 else text[:77] + "..."
        super().__init__(f"bad kernel expression at column {column}: {reason} in {shown!r}")

    def caret(self) -> str:
        """Two lines: the expression and a caret under the offending column."""
        return f"{self.text}\n{' ' * (self.column - 1)}^"


@dataclass(frozen=True)
class Token:
    """One token: ``kind`` in NUMBER, NAME, OP, END; its text and 1-based column."""

    kind: str
    text: str
    column: int


_TOKEN_RE = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<name>[A-Za-z_][A-Za-z_0-9]*)
  | (?P<op>\*\*|[-+*/(),=])
    """,
    re.VERBOSE,
)


def tokenize(text: str) -> list[Token]:
    """Split ``text`` into tokens, ending with an ``END`` token.

    Raises
    ------
    ExprError
        On a character that starts no token (the message names it and its column).
    """
    if not isinstance(text, str):
        raise InvalidArgument(f"`expression` must be a string, got {type(text).__name__}")
    if len(text) > MAX_LENGTH:
        raise ExprError(f"expression longer than {MAX_LENGTH} characters", MAX_LENGTH + 1, text)
    tokens: list[Token] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if m is None:
            ch = text[pos]
            hint = "; powers are written **" if ch == "^" else ""
            raise ExprError(f"unexpected character {ch!r}{hint}", pos + 1, text)
        kind = m.lastgroup
        if kind == "number":
            # "2.e" style leftovers: a number immediately followed by a name char.
            end = m.end()
            if end < len(text) and (text[end].isalpha() or text[end] == "_"):
                raise ExprError(f"malformed number {text[pos : end + 1]!r}", pos + 1, text)
            tokens.append(Token("NUMBER", m.group(), pos + 1))
        elif kind == "name":
            tokens.append(Token("NAME", m.group(), pos + 1))
        elif kind == "op":
            tokens.append(Token("OP", m.group(), pos + 1))
        pos = m.end()
    tokens.append(Token("END", "", len(text) + 1))
    return tokens


# ---------------------------------------------------------------------------
# Values: a parsed sub-expression is a plain float or a kernel object.


@dataclass(frozen=True)
class _Param:
    name: str
    kind: str  # "kernel", "number", "int", "optional_int"
    default: Any = REQUIRED


@dataclass(frozen=True)
class _Function:
    name: str
    params: tuple[_Param, ...]
    build: Any  # callable(**kwargs) -> kernel
    summary: str


def _leaf_function(leaf: Leaf) -> _Function:
    params = tuple(_Param(p.name, p.kind, p.default) for p in leaf.params)
    return _Function(leaf.name, params, leaf.cls, leaf.summary)


def _exp(k, order):
    return exp(k, order=order)


#: ``exp``, the one combinator written as a call (the others are operators).
_EXP = _Function(
    "exp",
    (_Param("k", "kernel"), _Param("order", "optional_int", None)),
    _exp,
    "exp(k), or its Taylor series truncated after degree `order`",
)


def _functions() -> dict[str, _Function]:
    table = {}
    for leaf in LEAVES:
        func = _leaf_function(leaf)
        for spelling in leaf.spellings:
            table[spelling] = func
    table[_EXP.name] = _EXP
    return table


#: Names the language knows: every spelling of every catalogue leaf, then ``exp``.
FUNCTIONS: tuple[str, ...] = (
    *(spelling for leaf in LEAVES for spelling in leaf.spellings),
    _EXP.name,
)


def language_names() -> str:
    """The names of the language as the help lists them.

    ``linear, const(c), poly(degree, c=0), ..., exp(k, order=None)``: each
    catalogue leaf by its first spelling with its arguments, then ``exp``.
    """
    return ", ".join([leaf.usage() for leaf in LEAVES] + [_signature(_EXP)])


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.tokens = tokenize(text)
        self.i = 0
        self.depth = 0
        self.funcs = _functions()

    # -- helpers ---------------------------------------------------------
    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def error(self, reason: str, tok: Token | None = None) -> ExprError:
        tok = self.tok if tok is None else tok
        return ExprError(reason, tok.column, self.text)

    def describe(self, tok: Token) -> str:
        return "the end of the expression" if tok.kind == "END" else repr(tok.text)

    def accept(self, op: str) -> Token | None:
        if self.tok.kind == "OP" and self.tok.text == op:
            tok = self.tok
            self.i += 1
            return tok
        return None

    def expect(self, op: str, context: str) -> Token:
        tok = self.accept(op)
        if tok is None:
            raise self.error(f"expected {op!r} {context}, got {self.describe(self.tok)}")
        return tok

    def enter(self, tok: Token) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error(f"expression nested deeper than {MAX_DEPTH} levels", tok)

    def leave(self) -> None:
        self.depth -= 1

    def wrap(self, tok: Token, fn, *args):
        """Run an algebra operation; turn its errors into ExprError at ``tok``."""
        try:
            return fn(*args)
        except ExprError:
            raise
        except InvalidArgument as exc:
            raise self.error(str(exc), tok) from None
        except OverflowError:
            raise self.error("number arithmetic overflowed", tok) from None
        except (TypeError, ValueError, ArithmeticError) as exc:
            raise self.error(f"{type(exc).__name__}: {exc}", tok) from None

    # -- grammar ---------------------------------------------------------
    def parse(self):
        if self.tok.kind == "END":
            raise self.error("the expression is empty")
        value = self.expr()
        if self.tok.kind != "END":
            raise self.error(
                f"expected an operator (+, -, *, /, **) or the end, got {self.describe(self.tok)}"
            )
        return value

    def expr(self):
        left = self.term()
        while True:
            tok = self.accept("+") or self.accept("-")
            if tok is None:
                break
            right = self.term()
            left = self.wrap(tok, _add if tok.text == "+" else _sub, left, right)
        return left

    def term(self):
        left = self.unary()
        while True:
            tok = self.accept("*") or self.accept("/")
            if tok is None:
                break
            right = self.unary()
            left = self.wrap(tok, _mul if tok.text == "*" else _div, left, right)
        return left

    def unary(self):
        tok = self.accept("-")
        if tok is not None:
            self.enter(tok)
            value = self.unary()
            self.leave()
            return self.wrap(tok, _neg, value)
        if self.tok.kind == "OP" and self.tok.text == "+":
            raise self.error("unary '+' is not part of the language")
        return self.power()

    def power(self):
        base = self.atom()
        tok = self.accept("**")
        if tok is None:
            return base
        self.enter(tok)
        exponent = self.unary()
        self.leave()
        return self.wrap(tok, _pow, base, exponent)

    def atom(self):
        tok = self.tok
        if tok.kind == "NUMBER":
            self.i += 1
            value = float(tok.text)
            if not math.isfinite(value):
                raise self.error(f"number {tok.text} is not finite", tok)
            return value
        if tok.kind == "NAME":
            self.i += 1
            return self.call(tok)
        open_tok = self.accept("(")
        if open_tok is not None:
            self.enter(open_tok)
            value = self.expr()
            self.leave()
            self.expect(")", "to close the parenthesis")
            return value
        raise self.error(f"expected a kernel or a number, got {self.describe(tok)}")

    def call(self, name_tok: Token):
        func = self.funcs.get(name_tok.text.lower())
        if func is None:
            known = ", ".join(FUNCTIONS)
            hint = did_you_mean(name_tok.text.lower(), FUNCTIONS)
            raise self.error(f"unknown name {name_tok.text!r}{hint} (known: {known})", name_tok)
        args: list[tuple[Any, Token]] = []
        kwargs: dict[str, tuple[Any, Token]] = {}
        open_tok = self.accept("(")
        if open_tok is not None:
            self.enter(open_tok)
            while not (self.tok.kind == "OP" and self.tok.text == ")"):
                if self.tok.kind == "END" or (self.tok.kind == "OP" and self.tok.text == ","):
                    raise self.error(f"expected an argument, got {self.describe(self.tok)}")
                arg_tok = self.tok
                nxt = self.tokens[self.i + 1]
                if arg_tok.kind == "NAME" and nxt.kind == "OP" and nxt.text == "=":
                    self.i += 2
                    if arg_tok.text in kwargs:
                        raise self.error(f"argument {arg_tok.text!r} given twice", arg_tok)
                    kwargs[arg_tok.text] = (self.expr(), arg_tok)
                else:
                    if kwargs:
                        raise self.error("positional argument after a keyword argument", arg_tok)
                    args.append((self.expr(), arg_tok))
                if not self.accept(","):
                    break
            self.expect(")", f"to close the arguments of {name_tok.text}(")
            self.leave()
        return self.apply(func, name_tok, args, kwargs)

    def apply(self, func: _Function, name_tok: Token, args, kwargs):
        params = func.params
        if len(args) > len(params):
            extra_tok = args[len(params)][1]
            raise self.error(
                f"{name_tok.text} takes {len(params)} argument{'s' if len(params) != 1 else ''}"
                f" ({_signature(func)}), got {len(args)}",
                extra_tok,
            )
        bound: dict[str, tuple[Any, Token]] = {}
        for param, arg in zip(params[: len(args)], args, strict=True):
            bound[param.name] = arg
        names = {p.name for p in params}
        for key, arg in kwargs.items():
            if key not in names:
                raise self.error(
                    f"{name_tok.text} has no argument {key!r} ({_signature(func)})", arg[1]
                )
            if key in bound:
                raise self.error(f"argument {key!r} of {name_tok.text} given twice", arg[1])
            bound[key] = arg
        values: dict[str, Any] = {}
        for param in params:
            if param.name not in bound:
                if param.default is REQUIRED:
                    raise self.error(
                        f"{name_tok.text} needs the argument {param.name!r} ({_signature(func)})",
                        name_tok,
                    )
                values[param.name] = param.default
                continue
            value, tok = bound[param.name]
            values[param.name] = self.coerce(func, param, value, tok)
        # An error naming one argument (`degree` ...) points at that argument.
        try:
            return self.wrap(name_tok, lambda: func.build(**values))
        except ExprError as exc:
            for pname, (_value, tok) in bound.items():
                if f"`{pname}`" in exc.reason:
                    raise self.error(exc.reason, tok) from None
            raise

    def coerce(self, func: _Function, param: _Param, value, tok: Token):
        where = f"argument {param.name!r} of {func.name}"
        if param.kind == "kernel":
            if isinstance(value, float):
                raise self.error(f"{where} must be a kernel, got the number {_fmt(value)}", tok)
            return value
        if not isinstance(value, float):
            raise self.error(f"{where} must be a number, got a kernel", tok)
        if param.kind in ("int", "optional_int"):
            if not value.is_integer():
                raise self.error(f"{where} must be an integer, got {_fmt(value)}", tok)
            return int(value)
        return value


def _signature(func: _Function) -> str:
    parts = []
    for p in func.params:
        if p.default is REQUIRED:
            parts.append(p.name)
        else:
            parts.append(f"{p.name}={p.default!r}")
    return f"{func.name}({', '.join(parts)})"


def _fmt(x: float) -> str:
    return str(int(x)) if x.is_integer() and abs(x) < 1e15 else repr(x)


def _is_num(x) -> bool:
    return isinstance(x, float)


def _as_kernel(x):
    return Constant(x) if _is_num(x) else x


def _add(a, b):
    if _is_num(a) and _is_num(b):
        return _finite(a + b)
    return _as_kernel(a) + _as_kernel(b)


def _sub(a, b):
    if _is_num(a) and _is_num(b):
        return _finite(a - b)
    return _add(a, _neg(b))


def _neg(a):
    if _is_num(a):
        return -a
    return -1.0 * a


def _mul(a, b):
    if _is_num(a) and _is_num(b):
        return _finite(a * b)
    if _is_num(b):
        a, b = b, a
    return a * b


def _div(a, b):
    if not _is_num(b):
        raise InvalidArgument("division by a kernel is not part of the kernel algebra")
    if b == 0.0:
        raise InvalidArgument("division by zero")
    if _is_num(a):
        return _finite(a / b)
    return (1.0 / b) * a


def _pow(a, b):
    if not _is_num(b):
        raise InvalidArgument("the exponent must be a number, got a kernel")
    if _is_num(a):
        return _finite(math.pow(a, b))
    if not b.is_integer() or b < 0:
        raise InvalidArgument(
            f"a kernel power needs a non-negative integer exponent, got {_fmt(b)}"
        )
    return a ** int(b)


def _finite(x: float) -> float:
    if not math.isfinite(x):
        raise OverflowError("number arithmetic overflowed")
    return x


def parse_kernel(text: str):
    """Parse a kernel expression into a kernel of :mod:`kernelcheck.kernels`.

    Parameters
    ----------
    text : str
        The expression, e.g. ``"exp(linear, order=3) + 0.5*poly(2)"`` (see the
        module docstring for the grammar and the names).

    Returns
    -------
    Kernel
        The kernel the expression denotes, built with the kernel algebra
        (``+``, ``*``, ``**``, scaling, :func:`kernelcheck.kernels.exp`).

    Raises
    ------
    ExprError
        When the text is not an expression of the language, when it denotes a
        plain number rather than a kernel, or when the algebra refuses an
        operation (the message gives the column of the operator or name).
    """
    parser = _Parser(text)
    value = parser.parse()
    if _is_num(value):
        raise ExprError(
            f"the expression is the number {_fmt(value)}, not a kernel (write const({_fmt(value)}) "
            "for the constant kernel)",
            1,
            text,
        )
    return value
