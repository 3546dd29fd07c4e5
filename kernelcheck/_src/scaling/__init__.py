"""Measured complexity: time and memory against n, log-log slopes with intervals.

Claims C2 (exact attention costs O(n^2 d) per sequence), C3 (linear attention
costs O(n d), more exactly O(n D d_v)) and C11 (the recurrent state does not
grow with n) are statements about how cost grows with the sequence length n.
This room measures that growth on real runs and says how sure it is, one job
per module (each imports only the ones listed before it):

* :mod:`~kernelcheck._src.scaling.sizes`: grids of sizes and their check;
* :mod:`~kernelcheck._src.scaling.fit`: :func:`fit_exponent`, the Theil-Sen
  slope of ``log value`` against ``log n`` with Sen's or a bootstrap interval,
  and its verdict against an expected range;
* :mod:`~kernelcheck._src.scaling.plot`: the log-log plots, drawn through the
  core's one matplotlib guard and written through its one report writer;
* :mod:`~kernelcheck._src.scaling.measure`: :func:`measure`, timing a function
  over the sizes (warm-up, repeats, a robust per-size statistic) and its peak
  memory in a separate :mod:`tracemalloc` pass, and :class:`Measurement`;
* :mod:`~kernelcheck._src.scaling.experiment`: :func:`run_scaling`, softmax
  against linear attention with the registry's forms, each clock next to the
  form's cost model.
"""
