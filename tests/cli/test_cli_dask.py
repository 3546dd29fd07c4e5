"""``--workers`` / ``--scheduler`` of ``kernelcheck unbiased`` and ``kernelcheck essay`` (issue 9).

The Dask path must give the same report as an in-process run for the same seed
(the seeding and merging rules of :mod:`kernelcheck.stats`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from kernelcheck._src.claims.registry import run_claims


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kernelcheck", *args], capture_output=True, text=True, timeout=300
    )


def test_unbiased_on_a_local_dask_cluster_equals_the_local_report():
    pytest.importorskip("distributed")
    common = ("unbiased", "--trials", "4000", "--seed", "3", "--json")
    local = _run(*common)
    dask = _run(*common, "--workers", "2")
    assert local.returncode == dask.returncode == 0, dask.stderr[-2000:]
    assert json.loads(local.stdout) == json.loads(dask.stdout)


@pytest.mark.parametrize(
    "args, message",
    [
        (("unbiased", "--workers", "0"), "--workers"),
        (("unbiased", "--workers", "2", "--scheduler", "tcp://127.0.0.1:1"), "not allowed with"),
        (("essay", "--workers", "x"), "--workers"),
    ],
)
def test_bad_dask_options_are_usage_errors(args, message):
    r = _run(*args)
    assert r.returncode == 2
    assert message in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


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
