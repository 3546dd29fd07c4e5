"""``verify.attention``: a user's attention layer against the reference of its family.

``api`` (the public call and its pytest twin), ``cases`` (the inputs handed
to the layer), ``run`` (one case: call, read back, judge), ``reference`` (the
family's reference and error model for the options), ``checks`` (causality,
state hand-over, chunk sizes, gradients), ``diagnosis`` (known bug shapes),
``report`` (the result objects).
"""
