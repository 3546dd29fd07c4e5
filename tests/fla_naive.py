"""flash-linear-attention's pure-PyTorch references, loaded by path.

The installed fla-core ships naive reference implementations next to its
Triton kernels; its package imports Triton, which a CPU machine does not
have, so a reference file is loaded by its path (the files themselves need
only PyTorch and einops).  A test calling :func:`load` is skipped where
fla-core or the file is missing.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest


def load(family: str, filename: str = "naive.py"):
    """The module ``fla/ops/<family>/<filename>`` of the installed fla-core (else a skip)."""
    spec = importlib.util.find_spec("fla")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("fla-core is not installed")
    path = Path(spec.submodule_search_locations[0]) / "ops" / family / filename
    if not path.exists():
        pytest.skip(f"the installed fla ships no {family}/{filename} reference")
    name = f"fla_{family}_{Path(filename).stem}"
    module_spec = importlib.util.spec_from_file_location(name, path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module
