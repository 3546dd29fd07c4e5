"""pytest plugin: kernelcheck's Hypothesis profiles and a seeded random generator per test.

Installed with kernelcheck and registered as a ``pytest11`` entry point, so a
project that depends on kernelcheck gets, with no configuration:

* the Hypothesis settings profiles ``kernelcheck-ci`` (derandomized, no
  deadline, no example database), ``kernelcheck-dev`` and
  ``kernelcheck-thorough`` (see :mod:`kernelcheck._src.testing.profiles`),
  selectable with pytest's ``--hypothesis-profile=NAME``.  The plugin only
  adds: Hypothesis' own profiles are untouched, and Hypothesis is imported
  only when a ``kernelcheck-*`` profile is asked for (importing
  :mod:`kernelcheck.strategies` registers the profiles too);
* the fixtures :func:`kernelcheck_seed` (an ``int``) and :func:`kernelcheck_rng`
  (a :class:`numpy.random.Generator` made from it).  The seed is derived from
  the test's node id and a base seed, so each test has its own reproducible
  stream, independent of the order tests run in and of which other tests run.
  ``--kernelcheck-seed=N`` changes the base seed (default 0); the header of the
  test run prints it.

Examples
--------
In a test module of a project that uses kernelcheck::

    def test_my_feature_map(kernelcheck_rng):
        X = kernelcheck_rng.standard_normal((16, 3))
        ...

Without the entry point (for example, a source checkout not installed), load
it by hand with ``pytest -p kernelcheck.pytest_plugin``.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

__all__ = ["kernelcheck_seed", "kernelcheck_rng", "seed_for"]

_DEFAULT_BASE_SEED = 0


def seed_for(nodeid: str, base_seed: int = _DEFAULT_BASE_SEED) -> int:
    """The seed of one test: a 63-bit integer from SHA-256 of ``base_seed`` and ``nodeid``.

    Parameters
    ----------
    nodeid : str
        The pytest node id, e.g. ``"tests/test_x.py::test_y[3]"``.
    base_seed : int
        The run's base seed (``--kernelcheck-seed``).

    Returns
    -------
    int
        A non-negative integer below 2**63; the same arguments give the same seed
        on every machine and Python version (no use of :func:`hash`).

    Examples
    --------
    >>> seed_for("tests/test_a.py::test_b") == seed_for("tests/test_a.py::test_b")
    True
    >>> seed_for("tests/test_a.py::test_b") != seed_for("tests/test_a.py::test_c")
    True
    """
    digest = hashlib.sha256(f"{int(base_seed)}:{nodeid}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kernelcheck")
    group.addoption(
        "--kernelcheck-seed",
        action="store",
        type=int,
        default=_DEFAULT_BASE_SEED,
        metavar="N",
        help="base seed of the kernelcheck_seed / kernelcheck_rng fixtures (default 0)",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Register the ``kernelcheck-*`` profiles before Hypothesis' plugin loads one of them."""
    profile = config.getoption("hypothesis_profile", default=None)
    if isinstance(profile, str) and profile.startswith("kernelcheck-"):
        from kernelcheck._src.testing.profiles import register_profiles

        register_profiles()


def pytest_report_header(config: pytest.Config) -> str:
    return f"kernelcheck: base seed {config.getoption('kernelcheck_seed')}"


@pytest.fixture
def kernelcheck_seed(request: pytest.FixtureRequest) -> int:
    """The current test's seed: :func:`seed_for` of its node id and ``--kernelcheck-seed``.

    Examples
    --------
    >>> def test_seed_is_an_int(kernelcheck_seed):
    ...     assert isinstance(kernelcheck_seed, int)
    """
    return seed_for(request.node.nodeid, request.config.getoption("kernelcheck_seed"))


@pytest.fixture
def kernelcheck_rng(kernelcheck_seed: int) -> np.random.Generator:
    """A fresh :class:`numpy.random.Generator` seeded with :func:`kernelcheck_seed`.

    Examples
    --------
    >>> def test_draws(kernelcheck_rng):
    ...     assert kernelcheck_rng.standard_normal(3).shape == (3,)
    """
    import numpy as np

    return np.random.default_rng(kernelcheck_seed)
