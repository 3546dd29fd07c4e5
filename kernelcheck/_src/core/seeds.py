"""Seeds: what a ``seed`` argument may be, and the one rule for deriving child seeds.

Every random function of kernelcheck takes a ``seed`` (an int, a
:class:`numpy.random.SeedSequence` or a :class:`numpy.random.Generator`);
``None`` is refused, so the same call gives the same numbers.

A computation that needs several independent streams (the shards of a Monte
Carlo run, the inputs of a scaling experiment, the restarts of a search)
takes one root :class:`~numpy.random.SeedSequence` (:func:`as_seed_sequence`)
and gives each part the child :func:`child_seed` derives at a path no other
part uses.  Nothing else derives seeds: no ``seed + 1`` (the streams of
seeds 0 and 1 would be the same streams one run apart), no entropy lists
built by hand.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from kernelcheck._src.core.validate import as_int, describe
from kernelcheck.errors import InvalidArgument

__all__ = ["as_rng", "as_seed_sequence", "child_seed"]


def as_rng(seed: Any, name: str = "seed") -> np.random.Generator:
    """A NumPy Generator from a seed, SeedSequence or Generator.

    ``None`` is refused: every random function in kernelcheck is reproducible,
    so the caller states the seed.

    Parameters
    ----------
    seed : int, numpy.random.SeedSequence or numpy.random.Generator
        The caller's seed (a non-negative int); a Generator is returned as it is.
    name : str, default "seed"
        The argument's name, used in messages.

    Returns
    -------
    numpy.random.Generator
        The generator.
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

    Parameters
    ----------
    seed : int, numpy.random.SeedSequence or numpy.random.Generator
        The caller's seed (a non-negative int).
    name : str, default "seed"
        The argument's name, used in messages.

    Returns
    -------
    numpy.random.SeedSequence
        The root seed.
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


def child_seed(root: np.random.SeedSequence, *path: int) -> np.random.SeedSequence:
    """The one rule for deriving seeds: the child of ``root`` at ``path``.

    ``child_seed(root, k)`` is the k-th child :meth:`numpy.random.SeedSequence.spawn`
    of a fresh ``root`` would give, and ``child_seed(root, k, j)`` the j-th
    child of that one: the spawn key of ``root`` extended by ``path``.  Unlike
    ``spawn`` it changes nothing in ``root``, so the child depends only on
    the root seed and the path, whoever asks first.  Every seeded part of a
    computation takes its seed from here, at a path no other part uses, so
    the parts are independent.

    Parameters
    ----------
    root : numpy.random.SeedSequence
        The computation's root seed (see :func:`as_seed_sequence`).
    *path : int
        Non-negative integers, one per level below ``root``.

    Returns
    -------
    numpy.random.SeedSequence
        The child, with ``root``'s entropy and pool size.

    Examples
    --------
    >>> root = np.random.SeedSequence(7)
    >>> child_seed(root, 2).spawn_key
    (2,)
    >>> child_seed(root, 2).generate_state(2).tolist() == root.spawn(3)[2].generate_state(
    ...     2
    ... ).tolist()
    True
    """
    if not isinstance(root, np.random.SeedSequence):
        raise InvalidArgument(
            f"`root` must be a numpy.random.SeedSequence (see as_seed_sequence), "
            f"got {describe(root)}"
        )
    keys = tuple(as_int(k, "path", minimum=0) for k in path)
    return np.random.SeedSequence(
        root.entropy, spawn_key=tuple(root.spawn_key) + keys, pool_size=root.pool_size
    )
