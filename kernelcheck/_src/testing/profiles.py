"""Hypothesis settings profiles used by kernelcheck's own suite and offered to users.

* ``kernelcheck-ci``: derandomized (the same examples every run), no deadline,
  no example database; kernelcheck's own suite loads it when the
  environment variable ``CI`` is ``true``.
* ``kernelcheck-dev``: Hypothesis' randomised search with a modest number of examples.
* ``kernelcheck-thorough``: many examples, for a long run
  (``--hypothesis-profile=kernelcheck-thorough``).

The names carry the ``kernelcheck-`` prefix so that Hypothesis' own profiles
(``default``, ``ci``, ``debug``) are never replaced in a project that merely
has kernelcheck installed.  Importing this module imports Hypothesis.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

__all__ = ["register_profiles", "load_default_profile", "PROFILES"]

#: The profiles kernelcheck registers, all prefixed ``kernelcheck-``.
PROFILES = ("kernelcheck-ci", "kernelcheck-dev", "kernelcheck-thorough")

_SUPPRESS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]


def register_profiles() -> None:
    """Register the ``kernelcheck-ci``, ``kernelcheck-dev`` and ``kernelcheck-thorough`` profiles.

    Idempotent; no other profile is touched.
    """
    settings.register_profile(
        "kernelcheck-ci",
        derandomize=True,
        deadline=None,
        database=None,
        max_examples=50,
        print_blob=True,
        suppress_health_check=_SUPPRESS,
    )
    settings.register_profile(
        "kernelcheck-dev", deadline=None, max_examples=50, suppress_health_check=_SUPPRESS
    )
    settings.register_profile(
        "kernelcheck-thorough", deadline=None, max_examples=2000, suppress_health_check=_SUPPRESS
    )


def load_default_profile() -> str:
    """Load ``kernelcheck-ci`` when ``CI=true`` (or the profile ``HYPOTHESIS_PROFILE`` names),
    else ``kernelcheck-dev``; return the name.  For kernelcheck's own suite (its ``conftest.py``).
    """
    register_profiles()
    name = os.environ.get("HYPOTHESIS_PROFILE")
    if not name:
        ci = os.environ.get("CI", "").lower() in ("1", "true", "yes")
        name = "kernelcheck-ci" if ci else "kernelcheck-dev"
    settings.load_profile(name)
    return name
