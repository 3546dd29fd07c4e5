"""``benchmarks/gpu_verify.py``: prepared for a CUDA device, a one-line skip without one.

On this machine (no GPU) the script must exit 0 and say in one line why it
ran nothing; its kernels' options must name the families they mean (a typo
would only show on a GPU).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from kernelcheck._src.attention.registry import select_family
from kernelcheck.errors import InvalidArgument

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "gpu_verify.py"


def _script():
    spec = importlib.util.spec_from_file_location("gpu_verify", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_without_a_gpu_it_skips_in_one_line():
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is here: the script runs for real")
    run = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True,
                         timeout=120, check=False)  # fmt: skip
    assert run.returncode == 0, run.stderr
    lines = run.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpu_verify: skipped: "), run.stdout


def test_its_kernels_select_the_families_they_mean():
    pytest.importorskip("torch")
    expected = {
        "chunk_simple_gla": "gated",
        "chunk_gated_delta_rule": "gated_delta",
        "chunk_kda": "kda",
        "scaled_dot_product_attention": "softmax",
        "chunk_gla": None,  # the per-channel family, where this kernelcheck has it
    }
    selecting = {"feature_map", "decay", "key_decay", "beta", "dplr_a", "dplr_b", "kernel"}
    for name, _, options in _script()._kernels():
        given = frozenset(o for o in options if o in selecting)
        try:
            family = select_family(given).name
        except InvalidArgument:
            assert expected[name] is None, name
            continue
        assert expected[name] in (None, family), (name, family)
