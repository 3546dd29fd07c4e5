"""A user function of two points called pair by pair (kernelcheck._src.core.pairs).

Every call gets its own copies of the rows, a real number is taken and anything
else refused naming the call, and the calls wait at most until the enclosing
deadline.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck.errors import InvalidArgument


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
