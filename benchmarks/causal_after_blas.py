"""Causal `parallel` right after a multithreaded BLAS call, and not: the spinning-thread effect.

OpenBLAS's worker threads busy-wait for a while after a threaded call before
they sleep.  The causal forms run their groups of chunks on their own worker
threads with BLAS limited to one thread; started right after a threaded
product (as in benchmarks/report.py's interleaved rounds, where the GEMM floor
runs just before), they share the cores with OpenBLAS's still-spinning
threads.  This script times causal `parallel` (n = 8192, D = 256, d_v = 64)
after another causal call, right after the floor, and 0.3 s after the floor,
interleaved over 15 rounds, and prints minima and medians next to the floor.

    python3 benchmarks/causal_after_blas.py
"""

from __future__ import annotations

import os
import time

import numpy as np

from kernelcheck.attention import parallel


def measure(pq, pk, V, rounds: int = 15) -> dict[str, list[float]]:
    """Seconds of the floor and of causal `parallel` in the three situations, per round."""

    def floor():
        return pq @ (pk.T @ V)

    def causal():
        return parallel(pq, pk, V, causal=True)

    def timed(f):
        s = time.perf_counter()
        f()
        return time.perf_counter() - s

    times: dict[str, list[float]] = {
        "floor": [],
        "causal after causal": [],
        "causal right after floor": [],
        "causal 0.3 s after floor": [],
    }
    for _ in range(rounds):
        causal()
        times["causal after causal"].append(timed(causal))
        times["floor"].append(timed(floor))
        times["causal right after floor"].append(timed(causal))
        floor()
        time.sleep(0.3)
        times["causal 0.3 s after floor"].append(timed(causal))
    return times


def main(rounds: int = 15) -> None:
    rng = np.random.default_rng(0)
    n, D, dv = 8192, 256, 64
    pq, pk = rng.random((n, D)) + 0.05, rng.random((n, D)) + 0.05
    V = rng.standard_normal((n, dv))
    print("load average at start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    times = measure(pq, pk, V, rounds)
    fmin = min(times["floor"])
    for name, v in times.items():
        print(
            f"{name:26s} min {1e3 * min(v):6.1f} ms ({min(v) / fmin:.2f}x the floor's min)"
            f"  median {1e3 * float(np.median(v)):6.1f} ms"
        )
    print("load average at end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
