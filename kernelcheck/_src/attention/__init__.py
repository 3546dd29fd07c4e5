"""Attention in every form, one folder per family (claims C1-C3, C10-C12, C14, C15, C19, C20).

* ``registry`` -- the table of families and their forms (``FAMILIES``,
  ``FORMS``): the one list every consumer reads; ``records`` -- its record
  types (:class:`~kernelcheck._src.attention.records.Family`, ``Form``);
* ``families/<family>/`` -- each family's forms, error bound, cost model,
  reference backward pass and the specification through which
  ``verify.attention`` meets a layer of the family: ``softmax`` (C1, C2),
  ``kernelized`` (C10), ``linear`` (C10, C11, C14, C19), ``gated`` (C20);
* ``common/`` -- what several families share: blocking and worker threads,
  the decays of the gated chunked form, input checks, result types, the
  engine of the linear-type forms, bound terms, the VJP blocks and the base
  of the families' specifications.

Normalisers ``<= 0`` (C12) are never hidden by an added eps: they raise
:class:`~kernelcheck.errors.BadNormalizer` or are reported.  Error models
follow Higham, *Accuracy and Stability of Numerical Algorithms*, ch. 3.
"""
