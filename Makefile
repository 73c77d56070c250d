# Two commands do everything on a fresh machine: `make demo` and `make test`.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test test-shuffled lint system-deps demo-deps kernels test-kernels bench bench-captures bench-ab mutants clean

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# --no-compile: each module is byte-compiled when first imported, not all ~12 k files up front (~25 s)
	$(PY) -m pip install -q --no-compile -e '.[dev]'
	touch $(STAMP)

# The tests' and the bench's own Python extras (bench/requirements.txt: the pinned CPU torch wheel, never a
# dependency of tracecore). Installed before the suite starts, so its DDP modules do not each install it.
BENCH_DEPS := $(VENV)/.bench-deps
$(BENCH_DEPS): $(STAMP) bench/requirements.txt
	$(PY) -m pip install -q -r bench/requirements.txt
	touch $(BENCH_DEPS)

# Meta's Holistic Trace Analysis in a venv of its own (HTA 0.5.0 needs pandas < 3, tracecore's has 3): the
# reference the suite checks step_breakdown against (bench/hta_breakdown.py runs in it).
VENV_HTA  ?= .venv-hta
HTA_STAMP := $(VENV_HTA)/.installed
$(HTA_STAMP): bench/requirements-hta.txt
	python3 -m venv $(VENV_HTA)
	$(VENV_HTA)/bin/python -m pip install -q --no-compile -r bench/requirements-hta.txt
	touch $(HTA_STAMP)

# Everything the tests, bench and runners use (ssh and slurm daemons, tshark, chromium, ...).
system-deps:
	bash scripts/install-system-deps.sh

# Only what the demo needs: a C compiler and Python's headers for the kernels' ahead-of-time build.
demo-deps:
	bash scripts/install-system-deps.sh --demo

# The reader's kernels compiled ahead of time (tracecore/reader/aot.py): skipped when current.
kernels: $(STAMP) demo-deps
	$(PY) -m tracecore.reader.aot --if-stale

# The suite compares both builds of the kernels: the module and numba's JIT cache, compiled side by side.
test-kernels: $(STAMP) system-deps
	$(PY) -m tracecore.reader.aot --if-stale --jit-cache

demo: $(STAMP) demo-deps kernels
	$(VENV)/bin/tracecore demo

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/deptry .

# Whole test modules on TEST_WORKERS processes (pytest-xdist; tests/conftest.py puts slow modules first).
TEST_WORKERS ?= 2
# Lint beside the bench extras' install, then the two kernel builds side by side (not during the install:
# it upgrades setuptools, which numba's ahead-of-time build imports).
test: $(STAMP) system-deps
	$(MAKE) --no-print-directory -j2 lint $(BENCH_DEPS) $(HTA_STAMP)
	$(MAKE) --no-print-directory test-kernels
	$(VENV)/bin/pytest -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder

# The same suite in a random order (pytest-randomly; the seed is printed and
# `.venv/bin/pytest -p randomly --randomly-seed=N` repeats it): no test may depend on another's order.
test-shuffled: $(STAMP) system-deps test-kernels $(BENCH_DEPS) $(HTA_STAMP)
	$(VENV)/bin/pytest -p randomly

# Opt-in, slow: generate real captures (GBs) and run the peer benchmark.
bench-captures: $(STAMP) system-deps
	$(PY) -m bench.make_captures
	$(PY) -m bench.make_captures --size 2GB --snaplen 128
	$(PY) -m bench.make_rdma_capture --out bench/data/corpus_roce-repeat-none-0-rdma-normal-ring/worker-0-tcpdump.pcap

bench: $(STAMP) system-deps kernels
	$(PY) -m bench.peers --data bench/data/iperf3-bulk_2GB_s128-none-0-tcp-normal-ring
	$(PY) -m bench.peers --data bench/data/iperf3-bulk_2GB-none-0-tcp-normal-ring
	$(PY) -m bench.views_perf

# Opt-in, slow: this checkout against main before the RDMA merge on the same TCP and RoCE captures
# (bench/ab_commits.py; results in bench/results/rdma-*-ab.md, analysis in bench/results/rdma-reader.md).
bench-ab: $(STAMP) system-deps kernels
	$(PY) -m bench.ab_commits --copies 4 --reps 7 --instructions 1000000 --out bench/results/rdma-tcp-ab.md
	$(PY) -m bench.ab_commits --data bench/data/corpus_roce-repeat-none-0-rdma-normal-ring --copies 10 --reps 5 \
	  --instructions 200000 --out bench/results/rdma-roce-ab.md

# Mutation check: one-line bugs in queries/, the dedup rule and the reader kernel, each run against the
# test modules of its area in a private copy of the checkout (bench/mutants.py); every mutant must be
# killed. Report: bench/results/mutants-latest.md. `make test` runs the CI subset (`--ci`: a mutant of every
# view, the dedup rule and the kernel against the tests that kill it) in tests/test_bench_mutants.py.
mutants: $(STAMP) kernels
	$(PY) -m bench.mutants --jobs 2

clean:
	rm -rf $(VENV) $(VENV_HTA) dist build tracecore-data
