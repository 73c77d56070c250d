"""Performance models fitted to training logs and traces.

Each module is a set of pure library functions over plain data (polars frames, numpy arrays,
dataclasses) that return result tables, plus `chart(...)` functions that return Altair charts.
`tasks` turns each `tracecore model ...` command into one call returning titled tables and a chart;
`arguments` reads the text forms of their inputs. The CLI only parses options, calls a task, prints.

- `scaling`: epoch time vs GPUs and batch size, speedups, compute/communication split and the
  ring all-reduce traffic model (`reference_study`: the published ResNet-18 / CIFAR-10 DataParallel
  study), next to measured wire bytes where a run has traces.
- `optimus`: Optimus loss-curve fit and convergence point, Ridge on model depth and GPU type, and
  the parameter-server speed models (the reference Optimus notebook).
- `traffic`: the paper's Sec. VI linear model of MB per training step.
"""
