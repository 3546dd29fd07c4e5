"""Shared helpers of the benchmarks.

Under ``--benchmark-disable`` (the CI run) each benchmark runs once as a
correctness test; :func:`size_for` lets it pick a small input there and the
full benchmark size otherwise.
"""

from __future__ import annotations

import pytest


@pytest.fixture
def size_for(benchmark):
    """``size_for(full, small)``: ``small`` when benchmarks are disabled, else ``full``."""

    def pick(full, small):
        return small if benchmark.disabled else full

    return pick
