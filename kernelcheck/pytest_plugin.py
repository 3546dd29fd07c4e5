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
  (a :class:`numpy.random.Generator` made from it).  By default the seed is
  derived from the test's node id and a base seed, so each test has its own
  reproducible stream, independent of the order tests run in and of which
  other tests run.  The base seed is ``--kernelcheck-seed=N`` on the command
  line, else the ini option ``kernelcheck_seed`` (default 0); the header of
  the test run prints it.

Pinning seeds.  A derived seed changes when a test is renamed or moved (its
node id changes), and a statistical check at false-alarm rate ``alpha`` fails
for ``alpha`` of all seeds, so a rename can flip a verdict.  Two ways to pin:

* ``@pytest.mark.kernelcheck_seed(N)`` on a test (or a class or module, via
  ``pytestmark``): that test's seed is ``N`` itself, whatever its name;
* the ini option ``kernelcheck_seed_mode = fixed``: every test's seed is the
  base seed itself (``node-id``, the default, derives it).

Examples
--------
In a test module of a project that uses kernelcheck::

    def test_my_feature_map(kernelcheck_rng):
        X = kernelcheck_rng.standard_normal((16, 3))
        ...

    @pytest.mark.kernelcheck_seed(20240611)   # pinned: renaming keeps the verdict
    def test_my_sampler_is_unbiased(kernelcheck_seed):
        assert_unbiased(my_sampler, Exponential(), X, trials=20000, seed=kernelcheck_seed)

and in ``pytest.ini`` (or ``[tool.pytest.ini_options]`` of ``pyproject.toml``)::

    [pytest]
    kernelcheck_seed = 7
    kernelcheck_seed_mode = fixed

Without the entry point (for example, a source checkout not installed), load
it by hand with ``pytest -p kernelcheck.pytest_plugin``.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

__all__ = ["kernelcheck_seed", "kernelcheck_rng", "seed_for", "SEED_MODES"]

_DEFAULT_BASE_SEED = 0

#: How a test's seed is made (ini option ``kernelcheck_seed_mode``): ``node-id``
#: derives it from the base seed and the node id, ``fixed`` uses the base seed itself.
SEED_MODES = ("node-id", "fixed")

_MARKER = "kernelcheck_seed"


def seed_for(nodeid: str, base_seed: int = _DEFAULT_BASE_SEED) -> int:
    """The seed of one test: a 63-bit integer from SHA-256 of ``base_seed`` and ``nodeid``.

    Parameters
    ----------
    nodeid : str
        The pytest node id, e.g. ``"tests/test_x.py::test_y[3]"``.
    base_seed : int, default 0
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
        default=None,
        metavar="N",
        help="base seed of the kernelcheck_seed / kernelcheck_rng fixtures "
        "(default: the ini option kernelcheck_seed, else 0)",
    )
    parser.addini(
        "kernelcheck_seed",
        "base seed of the kernelcheck_seed / kernelcheck_rng fixtures (default 0)",
        default=str(_DEFAULT_BASE_SEED),
    )
    parser.addini(
        "kernelcheck_seed_mode",
        "node-id (default: each test's seed derived from the base seed and its node id) "
        "or fixed (every test's seed is the base seed)",
        default=SEED_MODES[0],
    )


def _nonnegative_int(value, where: str) -> int:
    """An integer >= 0 from a config value or marker argument; a clear usage error otherwise."""
    if isinstance(value, bool):
        raise pytest.UsageError(f"{where} must be an integer >= 0, got {value!r}")
    try:
        number = int(str(value).strip()) if isinstance(value, str) else value
    except ValueError:
        raise pytest.UsageError(f"{where} must be an integer >= 0, got {value!r}") from None
    if not isinstance(number, int) or number < 0:
        raise pytest.UsageError(f"{where} must be an integer >= 0, got {value!r}")
    return number


def _base_seed(config: pytest.Config) -> int:
    """The base seed: ``--kernelcheck-seed``, else the ini option ``kernelcheck_seed``."""
    cli = config.getoption("kernelcheck_seed")
    if cli is not None:
        return _nonnegative_int(cli, "--kernelcheck-seed")
    return _nonnegative_int(config.getini("kernelcheck_seed"), "the ini option kernelcheck_seed")


def _seed_mode(config: pytest.Config) -> str:
    mode = str(config.getini("kernelcheck_seed_mode")).strip()
    if mode not in SEED_MODES:
        raise pytest.UsageError(
            f"the ini option kernelcheck_seed_mode must be one of {', '.join(SEED_MODES)}, "
            f"got {mode!r}"
        )
    return mode


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Register the marker, check the seed options, and register the ``kernelcheck-*``
    profiles before Hypothesis' plugin loads one of them."""
    config.addinivalue_line(
        "markers",
        f"{_MARKER}(n): pin the seed of the kernelcheck_seed / kernelcheck_rng fixtures "
        "to the integer n (renaming the test keeps it)",
    )
    _base_seed(config)
    _seed_mode(config)
    profile = config.getoption("hypothesis_profile", default=None)
    if isinstance(profile, str) and profile.startswith("kernelcheck-"):
        from kernelcheck._src.testing.profiles import register_profiles

        register_profiles()


def pytest_report_header(config: pytest.Config) -> str:
    how = (
        "every test's seed is the base seed"
        if _seed_mode(config) == "fixed"
        else "seeds derived from each test's node id"
    )
    return (
        f"kernelcheck: base seed {_base_seed(config)} ({how}; pin one with @pytest.mark.{_MARKER})"
    )


@pytest.fixture
def kernelcheck_seed(request: pytest.FixtureRequest) -> int:
    """The current test's seed.

    ``N`` of the closest ``@pytest.mark.kernelcheck_seed(N)``; else the base
    seed itself when ``kernelcheck_seed_mode = fixed``; else :func:`seed_for`
    of the test's node id and the base seed (``--kernelcheck-seed`` or the
    ini option ``kernelcheck_seed``).

    Examples
    --------
    >>> def test_seed_is_an_int(kernelcheck_seed):
    ...     assert isinstance(kernelcheck_seed, int)
    """
    marker = request.node.get_closest_marker(_MARKER)
    if marker is not None:
        if len(marker.args) != 1 or marker.kwargs:
            raise pytest.UsageError(
                f"@pytest.mark.{_MARKER} takes one integer (the seed), got "
                f"args {marker.args!r} and keywords {marker.kwargs!r}"
            )
        return _nonnegative_int(marker.args[0], f"the argument of @pytest.mark.{_MARKER}")
    base = _base_seed(request.config)
    if _seed_mode(request.config) == "fixed":
        return base
    return seed_for(request.node.nodeid, base)


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
