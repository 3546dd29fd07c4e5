"""Speed-up of a 10^7-trial unbiasedness report from 1 to 2 local Dask workers.

Reproduces the table of ``docs/distributed.md`` with one command::

    python benchmarks/distributed_speedup.py            # 10^7 trials, 1 and 2 workers
    python benchmarks/distributed_speedup.py --trials 1000000 --json out.json

The report is ``kernelcheck unbiased`` with its defaults (positive random
features, d = 4, m = 16, 4 x 4 pairs, seed 0, no sweep), i.e.
:func:`kernelcheck._src.verify.unbiased.command.run_unbiased_cli`.  For each worker
count a ``distributed.LocalCluster`` of single-threaded worker processes is
started by :func:`kernelcheck.distributed.dask_executor`, warmed up with a
small report (imports, first pickles), then a control is timed -- a fixed
amount of embarrassingly parallel NumPy work split over the workers, whose
speed-up is the most this machine offers at that moment -- then the report is timed
``--repeats`` times (the minimum is kept: the machine's other load only ever
adds time).  Every distributed report is checked byte for byte against the
in-process report (``to_json``), which is timed too, as the reference.

Wall-clock times depend on the machine and on what else runs on it: the
script prints the 1-minute load average before and after, and the CPU
seconds each report consumed (in-process: this process, BLAS threads
included; on the cluster: the sum over the worker processes), which separate
the cost of the work from the share of the CPUs it was given.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time


def _spin(iterations: int) -> float:
    """Fixed CPU work with no I/O: repeated 256 x 256 GEMMs (the control task)."""
    import numpy as np

    a = np.random.default_rng(0).standard_normal((256, 256))
    for _ in range(iterations):
        a = np.tanh(a @ a.T / 256.0)
    return float(a.sum())


def _control(executor, workers: int, iterations: int) -> float:
    """Seconds for a fixed amount of embarrassingly parallel work split over the workers.

    Its ratio between worker counts is the speed-up this machine offers right
    now (the ceiling for the report), measured next to the report.
    """
    parts = [iterations // workers] * workers
    t0 = time.perf_counter()
    for fut in [executor.submit(_spin, n) for n in parts]:
        fut.result()
    return time.perf_counter() - t0


def _timed(fn, repeats):
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10_000_000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument(
        "--shards", type=int, default=None, help="tasks per report (default: 4 per worker thread)"
    )
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument(
        "--control", type=int, default=2000, help="GEMM iterations of the parallel control"
    )
    parser.add_argument("--no-serial", action="store_true", help="skip the in-process run")
    parser.add_argument("--json", metavar="FILE", help="also write the numbers as JSON")
    args = parser.parse_args(argv)

    from distributed import default_client

    from kernelcheck._src.verify.unbiased.command import run_unbiased_cli
    from kernelcheck.distributed import dask_executor, suggested_shards

    def report(executor=None, shards=None, trials=args.trials):
        return run_unbiased_cli(
            trials=trials, sweep=None, progress=False, executor=executor, shards=shards
        )

    rows = []
    load0 = os.getloadavg()[0]
    reference = None
    if not args.no_serial:
        c0 = time.process_time()
        t, reference = _timed(report, args.repeats)
        cpu = (time.process_time() - c0) / args.repeats
        rows.append(
            {
                "executor": "in-process (no executor)",
                "workers": 0,
                "shards": None,
                "seconds": t,
                "cpu_seconds": cpu,
                "identical": True,
            }
        )
        print(f"in-process: {t:.2f} s, {cpu:.1f} CPU s", flush=True)
    else:
        reference = report()
    for w in args.workers:
        with dask_executor(workers=w, threads_per_worker=1) as ex:
            shards = args.shards if args.shards is not None else suggested_shards(ex)
            report(ex, shards, trials=max(2, min(args.trials, 50_000)))  # warm-up
            _control(ex, w, 2 * w)  # warm-up
            control = _control(ex, w, args.control)
            client = default_client()
            c0 = sum(client.run(time.process_time).values())
            t, rep = _timed(lambda ex=ex, shards=shards: report(ex, shards), args.repeats)
            cpu = (sum(client.run(time.process_time).values()) - c0) / args.repeats
        same = rep.to_json() == reference.to_json()
        rows.append(
            {
                "executor": f"dask LocalCluster, {w} worker(s) x 1 thread",
                "workers": w,
                "shards": shards,
                "seconds": t,
                "cpu_seconds": cpu,
                "control_seconds": control,
                "identical": same,
            }
        )
        print(
            f"{w} worker(s), {shards} shards: {t:.2f} s, {cpu:.1f} CPU s, "
            f"control {control:.2f} s, identical to in-process: {same}",
            flush=True,
        )
    load1 = os.getloadavg()[0]
    first = next((r for r in rows if r["workers"] == min(args.workers)), None)
    base = first["seconds"] if first else None
    cbase = first["control_seconds"] if first else None
    print()
    cpu_name = platform.processor() or platform.machine()
    print(
        f"{args.trials:.0e} trials; {os.cpu_count()} CPUs ({cpu_name}); "
        f"load average {load0:.1f} -> {load1:.1f}"
    )
    print(
        "| executor | shards | wall s | CPU s | speed-up vs 1 worker | "
        "control speed-up (machine ceiling) | identical report |"
    )
    print("|---|---:|---:|---:|---:|---:|---|")
    for r in rows:
        sp = f"{base / r['seconds']:.2f}x" if r["workers"] and base else "-"
        cs = f"{cbase / r['control_seconds']:.2f}x" if r["workers"] and cbase else "-"
        print(
            f"| {r['executor']} | {r['shards'] if r['shards'] else '-'} | "
            f"{r['seconds']:.1f} | {r['cpu_seconds']:.1f} | {sp} | {cs} | "
            f"{'yes' if r['identical'] else 'NO'} |"
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(
                {
                    "trials": args.trials,
                    "cpus": os.cpu_count(),
                    "load": [load0, load1],
                    "python": sys.version.split()[0],
                    "rows": rows,
                },
                fh,
                indent=2,
            )
    return 0 if all(r["identical"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
