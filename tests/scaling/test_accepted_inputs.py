"""What kernelcheck.scaling accepts, and that it never writes into it (claims C2, C3).

Read-only, float16 and list inputs give exactly the float64 fit; ``measure``
hands ``make_input``'s arrays to ``fn`` as they are, read-only ones intact.
"""

from __future__ import annotations

import numpy as np

from kernelcheck import scaling as S
from tests.inputs import readonly

SZ = (8, 16, 32)


# ---------------------------------------------------------------------------
# Accepted inputs: read-only arrays are not written, float16 gives the float64 answer
# ---------------------------------------------------------------------------


def test_fit_exponent_reads_readonly_float16_and_list_inputs_without_writing():
    """Read-only, float16 and list inputs give exactly the float64 fit; no input is written."""
    values = readonly([[1.0, 1.5], [2.0, 2.5], [4.5, 4.0]])
    sizes = np.array(SZ)
    sizes.setflags(write=False)
    expected = S.fit_exponent(list(SZ), values.copy(), method="bootstrap", n_resamples=200)
    got = S.fit_exponent(sizes, values, method="bootstrap", n_resamples=200)
    assert got.to_json() == expected.to_json()
    assert np.array_equal(values, [[1.0, 1.5], [2.0, 2.5], [4.5, 4.0]])
    half = np.array([1.0, 2.0, 4.0], dtype=np.float16)  # exact in float16
    assert S.fit_exponent(SZ, half).to_json() == S.fit_exponent(SZ, [1.0, 2.0, 4.0]).to_json()


def test_measure_passes_readonly_inputs_through_unwritten():
    """measure hands ``make_input``'s arrays to ``fn`` as they are; read-only ones stay intact."""
    seen = []

    def fn(a):
        seen.append(a.flags.writeable)
        return a.sum()

    inputs = {n: readonly(np.arange(n)) for n in SZ}
    m = S.measure(fn, SZ, make_input=inputs.__getitem__, repeats=1, warmup=0, memory=False)
    assert m.sizes == SZ and not any(seen)
    assert all(np.array_equal(inputs[n], np.arange(n)) for n in SZ)
