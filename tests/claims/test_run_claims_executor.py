"""``run_claims(..., executor=...)``: the same numbers on an executor, a non-executor refused."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from kernelcheck._src.claims.registry import run_claims


def test_claims_on_an_executor_equal_the_in_process_run():
    """C13 and C16 (Monte Carlo) and C5 (search) give the same numbers on a thread pool."""
    ids = ["C5", "C13", "C16"]
    plain = run_claims(ids, "quick")
    with ThreadPoolExecutor(2) as pool:
        pooled = run_claims(ids, "quick", executor=pool)
    assert [(r.claim, r.verdict, r.key_number) for r in plain] == [
        (r.claim, r.verdict, r.key_number) for r in pooled
    ]


def test_run_claims_refuses_a_non_executor():
    from kernelcheck.errors import InvalidArgument

    with pytest.raises(InvalidArgument, match="`executor` must be"):
        run_claims(["C7"], "quick", executor=object())
