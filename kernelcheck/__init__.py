"""kernelcheck: numerical verification of the mathematics of linear attention.

The essay "Linear Attention from first principles" derives linear attention from
kernel theory; kernelcheck turns each of its claims (C1..C18, see the docs) into
code that decides it numerically, with evidence:

* :mod:`kernelcheck.kernels` -- kernels as immutable values with an algebra and
  exact feature maps where the feature space is finite;
* :mod:`kernelcheck.features` -- exact and random feature maps;
* :mod:`kernelcheck.psd` -- positive semi-definiteness verdicts (C5, C6);
* :mod:`kernelcheck.attention` -- attention in exact, parallel, recurrent and
  chunked forms (C1, C10-C15);
* :mod:`kernelcheck.stats` -- Monte Carlo engine for random-feature estimators;
* :mod:`kernelcheck.verify`, :mod:`kernelcheck.testing`,
  :mod:`kernelcheck.strategies` -- what other projects call.

The most used names are re-exported here.
"""

from kernelcheck import (
    attention,
    errors,
    features,
    kernels,
    psd,
    scaling,
    stats,
    strategies,
    testing,
    verify,
)
from kernelcheck.errors import InvalidArgument
from kernelcheck.kernels import *  # noqa: F403
from kernelcheck.psd import *  # noqa: F403

__version__ = "0.1.0"

__all__ = [
    "InvalidArgument",
    "attention",
    "errors",
    "features",
    "kernels",
    "psd",
    "scaling",
    "stats",
    "strategies",
    "testing",
    "verify",
    *kernels.__all__,
    *psd.__all__,
]
