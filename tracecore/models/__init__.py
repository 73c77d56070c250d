"""Performance models fitted to training logs and traces.

Each module is a set of pure library functions over plain data (polars frames, numpy arrays,
dataclasses) that return result tables, plus `chart(...)` functions that return Altair charts.
The CLI (`tracecore model ...`) only parses options, calls these and prints.

- `scaling`: epoch time vs GPUs and batch size, speedups, compute/communication split and the
  ring all-reduce traffic model (seed 002), next to measured wire bytes where a run has traces.
- `optimus`: Optimus loss-curve fit and convergence point, Ridge on model depth and GPU type, and
  the parameter-server speed models (seed 003).
- `traffic`: the Sec. VI linear model of MB per training step (seed 000).
"""
