"""Positive semi-definiteness verdicts and Mercer features (claims C5, C6).

* :func:`check_psd` -- is this symmetric matrix PSD?  A certified verdict
  (:class:`Verdict`) with evidence (:class:`PSDResult`): a rounding-error
  certificate of definiteness, or an exactly verified witness vector.
* :func:`mercer_features` -- Theorem 2: ``Phi`` with ``Phi Phi^T = K``.
* :class:`Nystrom` -- the Mercer features carried to new points by the kernel.

See ``docs/psd.md`` for the ladder and the tolerance model.
"""

from kernelcheck._src.psd.ladder import check_psd
from kernelcheck._src.psd.mercer import MercerFeatures, Nystrom, mercer_features
from kernelcheck._src.psd.result import PSDResult, Verdict

__all__ = ["check_psd", "PSDResult", "Verdict", "mercer_features", "MercerFeatures", "Nystrom"]
