"""Seeds: what a ``seed`` argument may be, and the one rule for deriving child seeds.

Every random function of kernelcheck takes a ``seed`` (an int, a
:class:`numpy.random.SeedSequence` or a :class:`numpy.random.Generator`);
``None`` is refused, so the same call gives the same numbers.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from kernelcheck._src.core.validate import describe
from kernelcheck.errors import InvalidArgument

__all__ = ["as_rng", "as_seed_sequence"]


def as_rng(seed: Any, name: str = "seed") -> np.random.Generator:
    """A NumPy Generator from a seed, SeedSequence or Generator.

    ``None`` is refused: every random function in kernelcheck is reproducible,
    so the caller states the seed.
    """
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, np.random.SeedSequence):
        return np.random.default_rng(seed)
    return np.random.default_rng(_seed_int(seed, name))


def as_seed_sequence(seed: Any, name: str = "seed") -> np.random.SeedSequence:
    """The root :class:`numpy.random.SeedSequence` of a seeded computation.

    An int or a SeedSequence is used as is; a Generator gives up 128 bits of
    its stream as entropy (deterministic, and it advances the Generator).
    ``None`` is refused, as by :func:`as_rng`.
    """
    if isinstance(seed, np.random.SeedSequence):
        return seed
    if isinstance(seed, np.random.Generator):
        return np.random.SeedSequence([int(v) for v in seed.integers(0, 2**63, size=2)])
    return np.random.SeedSequence(_seed_int(seed, name))


def _seed_int(seed: Any, name: str) -> int:
    if seed is None:
        raise InvalidArgument(
            f"`{name}` must be given (an int, a numpy.random.SeedSequence or a Generator); "
            "kernelcheck never draws from unseeded randomness"
        )
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise InvalidArgument(
            f"`{name}` must be a non-negative int, a numpy.random.SeedSequence or a "
            f"numpy.random.Generator, got {describe(seed)}"
        )
    return int(seed)
