"""Calls of user code (kernelcheck._src.core.calls): a result other than real numbers refused."""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck.errors import InvalidArgument


def _complex_results():
    torch = pytest.importorskip("torch")
    jnp = pytest.importorskip("jax.numpy")
    return {
        "torch": torch.ones(2, dtype=torch.complex64),
        "jax": jnp.ones(2, dtype=jnp.complex64),
        "numpy": np.ones(2, dtype=complex),
    }


def test_a_callable_returning_a_complex_tensor_of_any_framework_is_refused():
    from kernelcheck._src.core.calls import call_user

    for name, value in _complex_results().items():
        with pytest.raises(InvalidArgument, match=r"^`f` returned .*expected real numbers"):
            call_user(lambda v=value: v, "`f`")
        real = value.real if name != "torch" else value.real.contiguous()
        assert call_user(lambda v=real: v, "`f`") is real, name
