"""Framework adapters: a device the framework cannot use is refused in one short line.

PyTorch's error for a backend it was built without (``mps``, ``xla``) lists
every dispatcher key over about 50 lines; the refusal quotes its first
sentence only, and still names the device and what to pass instead.
"""

from __future__ import annotations

import pytest

from kernelcheck import verify
from kernelcheck.errors import InvalidArgument

torch = pytest.importorskip("torch")

#: A dispatcher error as PyTorch words it: a first sentence, then pages of registrations.
DISPATCHER_TEXT = (
    "Could not run 'aten::empty.memory_format' with arguments from the 'MPS' backend. This "
    "could be because the operator doesn't exist for this backend.\n\n"
    + "\n".join(f"Key{i}: registered at /build/Register{i}.cpp:1 [kernel]" for i in range(50))
)


def _refusal(device) -> str:
    with pytest.raises(InvalidArgument) as info:
        verify.attention(lambda Q, K, V: V, framework="torch", device=device)
    return str(info.value)


def test_a_dispatcher_error_is_quoted_by_its_first_sentence(monkeypatch):
    def empty(*args, **kwargs):
        raise RuntimeError(DISPATCHER_TEXT)

    monkeypatch.setattr(torch, "empty", empty)
    message = _refusal("mps")
    assert "\n" not in message and len(message) < 200, message
    assert message == (
        "`device` 'mps' is not a usable torch device here (Could not run "
        "'aten::empty.memory_format' with arguments from the 'MPS' backend); pass 'cpu' or None"
    )


@pytest.mark.parametrize("device", ["mps", "xla", "cuda:7"])
def test_a_device_this_build_lacks_is_refused_in_one_line(device):
    if device == "mps" and torch.backends.mps.is_available():
        pytest.skip("this machine has an MPS device")
    if device == "cuda:7" and torch.cuda.device_count() > 7:
        pytest.skip("this machine has eight CUDA devices")
    message = _refusal(device)
    assert "\n" not in message and len(message) < 200, message
    assert message.startswith(f"`device` {device!r} is not a usable torch device here (")
    assert message.endswith("; pass 'cpu' or None")
