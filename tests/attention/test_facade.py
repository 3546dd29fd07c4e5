"""The public facade ``kernelcheck.attention``: its names documented, and the implementation's."""

from __future__ import annotations

import kernelcheck
from kernelcheck import attention as att

# ---------------------------------------------------------------------------
# Public surface and the documentation's example
# ---------------------------------------------------------------------------


def test_every_public_name_is_documented():
    for name in att.__all__:
        obj = getattr(att, name)
        assert obj.__doc__ and len(obj.__doc__.strip()) > 20, name
    assert kernelcheck.attention is att


def test_facade_exports_the_implementation():
    from kernelcheck._src.attention import registry
    from kernelcheck._src.attention.families.softmax import forms

    assert att.softmax is forms.softmax
    assert att.FORMS is registry.FORMS
    for name in att.__all__:
        obj = getattr(att, name)
        where = getattr(obj, "__module__", type(obj).__module__)
        assert where.startswith("kernelcheck._src.attention."), (name, where)
