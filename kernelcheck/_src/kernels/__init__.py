"""Kernels as immutable values with an algebra, their exact feature maps and their catalogue.

Loading the package loads every node module, so that the operators of
:class:`~kernelcheck._src.kernels.base.Kernel` find the node classes of their
roles (``Sum``, ``Scaled``, ``Product``, ``Power``, ``Constant``) whichever
module is imported first.
"""

from kernelcheck._src.kernels import combinators, leaves

__all__ = ["combinators", "leaves"]
