"""Hypothesis settings profiles used by kernelcheck's own suite and offered to users.

* ``ci``: derandomized (the same examples every run), no deadline, no example
  database; selected automatically when the environment variable ``CI`` is
  ``true``.
* ``dev``: Hypothesis' randomised search with a modest number of examples.
* ``thorough``: many examples, for a long run (``--hypothesis-profile=thorough``).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

__all__ = ["register_profiles", "load_default_profile", "PROFILES"]

PROFILES = ("ci", "dev", "thorough")

_SUPPRESS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]


def register_profiles() -> None:
    """Register the ``ci``, ``dev`` and ``thorough`` profiles (idempotent)."""
    settings.register_profile(
        "ci",
        derandomize=True,
        deadline=None,
        database=None,
        max_examples=50,
        print_blob=True,
        suppress_health_check=_SUPPRESS,
    )
    settings.register_profile(
        "dev", deadline=None, max_examples=50, suppress_health_check=_SUPPRESS
    )
    settings.register_profile(
        "thorough", deadline=None, max_examples=2000, suppress_health_check=_SUPPRESS
    )


def load_default_profile() -> str:
    """Load ``ci`` when ``CI=true`` (or ``HYPOTHESIS_PROFILE`` names one), else ``dev``."""
    register_profiles()
    name = os.environ.get("HYPOTHESIS_PROFILE")
    if not name:
        name = "ci" if os.environ.get("CI", "").lower() in ("1", "true", "yes") else "dev"
    settings.load_profile(name)
    return name
