"""Root conftest: select the Hypothesis profile (``ci`` under CI=true, else ``dev``)."""

from kernelcheck._src.testing.profiles import load_default_profile

load_default_profile()
