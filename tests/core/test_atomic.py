"""The atomic writer (kernelcheck._src.core.atomic): a failed write leaves the old file."""

from __future__ import annotations

import pytest

from kernelcheck._src.core.atomic import atomic_write, write_bytes_atomic, write_text_atomic


def test_atomic_write_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "sub" / "report.md"
    write_text_atomic(target, "one")
    with pytest.raises(KeyboardInterrupt):
        with atomic_write(target) as fh:
            fh.write("half")
            raise KeyboardInterrupt
    assert target.read_text() == "one"
    assert sorted(p.name for p in target.parent.iterdir()) == ["report.md"]
    write_bytes_atomic(tmp_path / "b.bin", b"\x00\x01")
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01"
    with pytest.raises(ValueError):
        with atomic_write(target, "a"):
            pass
