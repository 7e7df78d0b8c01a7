# tpuc front door. Every target sets up what it needs first (scripts/setup.sh:
# Debian packages, .venv with requirements.txt, CMake + Ninja build in build/),
# and is quick when nothing changed.
#
#   make / make build   set up and build (build/)
#   make demo           ... and run build/tpuc_demo
#   make test           C tests, Python tests of the PyTorch device, OpInfo
#                       conformance against tests/conformance/report.json,
#                       ASan+UBSan C tests (build-asan/), then libFuzzer
#                       targets for FUZZ_SECONDS each (build-fuzz/)
#   make bench          run every build/bench_* (JSON in bench/results/), table
#   make bench-runtime  run build/bench_runtime only, table
#   make bench-eager    run bench/bench_eager.py only (eager modes on GPT-2 and
#                       Llama, JSON + PNG in bench/results/), table
#   make bench-compile  run bench/bench_compile.py only (torch.compile against
#                       the eager modes and the plugin's own execute time,
#                       JSON + PNG in bench/results/), table
#   make bench-distributed  run bench/bench_distributed.py only (collectives'
#                       bus bandwidth: staged, Gloo, in-program; DDP and FSDP2
#                       steps, JSON + PNG in bench/results/), table
#   make bench-first-use  run bench/bench_first_use.py only (code that runs
#                       once, cold: a test-suite pattern and the first
#                       training steps, per eager mode; JSON), table
#   make test-upstream  run the libraries' own test files (transformers,
#                       diffusers, PyTorch's device-generic tests) on cpu and
#                       tpu from UPSTREAM_TESTS=DIR (made by
#                       scripts/upstream_tests.py extract), write
#                       tests/upstream/report.json, print the table
#   make format         clang-format -i over the C/C++ sources
#   make clean          remove the build trees (make distclean: and .venv)
#
# Variables: JOBS (parallel build jobs, 2), TEST_JOBS (processes the Python
#   tests and the conformance check run in: the cores, at most 4; the tests
#   are compile-bound and single-threaded), FUZZ_SECONDS (60 per target),
#   FUZZ_FLAGS (extra libFuzzer flags), CTEST_ARGS (extra ctest args),
#   PYTEST_ARGS (extra pytest args).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

JOBS ?= 2
TEST_JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); [ "$$n" -gt 4 ] && n=4; echo $$n)
FUZZ_SECONDS ?= 60
FUZZ_FLAGS ?=
CTEST_ARGS ?=
PYTHON := .venv/bin/python
BENCH_RESULTS := bench/results
FORMAT_DIRS := include src tests fuzz bench demo bindings

export JOBS TEST_JOBS FUZZ_SECONDS FUZZ_FLAGS

.PHONY: all build setup demo test test-c test-py test-conformance \
	conformance-report test-asan test-fuzz test-upstream bench \
	bench-runtime bench-device bench-eager bench-compile bench-distributed \
	bench-first-use \
	format clean distclean

all: build

build setup:
	scripts/setup.sh build

demo: build
	./build/tpuc_demo
	$(PYTHON) demo/hf_demo.py

# Stages run in order and stop at the first failure.
test:
	$(MAKE) --no-print-directory test-c
	$(MAKE) --no-print-directory test-py
	$(MAKE) --no-print-directory test-conformance
	$(MAKE) --no-print-directory test-asan
	$(MAKE) --no-print-directory test-fuzz

test-c: build
	ctest --test-dir build --output-on-failure $(CTEST_ARGS)

# The PyTorch device (torch + the binding built by `make build`).
test-py: build
	$(PYTHON) -m pytest tests/python -q -p no:cacheprovider -n $(TEST_JOBS) --dist loadfile $(PYTEST_ARGS)

# OpInfo conformance against the committed report: fails when a pair that
# passed there no longer passes (or no longer passes natively). The report
# is made in strict mode (each op's own program); the check runs in fused
# mode, the default, so it is also the modes' equivalence test on the
# OpInfo set: every pair strict mode passes must pass when its ops are
# recorded and run as fused segments.
test-conformance: build
	$(PYTHON) tests/conformance/opinfo.py --mode fused --jobs $(TEST_JOBS) --check tests/conformance/report.json

# Rewrites the committed conformance report from a fresh run.
conformance-report: build
	$(PYTHON) tests/conformance/opinfo.py --jobs $(TEST_JOBS) --out tests/conformance/report.json

test-asan:
	scripts/setup.sh build-asan -DTPUC_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
	ctest --test-dir build-asan --output-on-failure $(CTEST_ARGS)

test-fuzz:
	scripts/fuzz.sh

# Not part of `make test`: the files are other projects' and a fresh machine
# cannot fetch them. UPSTREAM_ARGS: e.g. --only pytorch, --timeout 300.
UPSTREAM_ARGS ?=
test-upstream: build
	@if [[ -z "$${UPSTREAM_TESTS:-}" ]]; then \
	  echo "test-upstream: set UPSTREAM_TESTS=DIR (a folder made by scripts/upstream_tests.py extract; see README)"; exit 2; fi
	$(PYTHON) -m pip install -q --no-deps -r tests/upstream/requirements.txt
	$(PYTHON) scripts/upstream_tests.py run "$$UPSTREAM_TESTS" $(UPSTREAM_ARGS)

bench: build
	mkdir -p $(BENCH_RESULTS)
	@shopt -s nullglob; benches=(build/bench_*); \
	if [[ $${#benches[@]} -eq 0 ]]; then echo "bench: no benchmarks built"; fi; \
	for b in "$${benches[@]}"; do \
	  [[ -x "$$b" && -f "$$b" ]] || continue; \
	  echo "== $$b"; \
	  TPUC_BENCH_RESULTS_DIR="$(CURDIR)/$(BENCH_RESULTS)" "$$b"; \
	done
	TPUC_BENCH_RESULTS_DIR="$(CURDIR)/$(BENCH_RESULTS)" $(PYTHON) bench/bench_device.py
	TPUC_BENCH_RESULTS_DIR="$(CURDIR)/$(BENCH_RESULTS)" $(PYTHON) bench/bench_eager.py $(BENCH_EAGER_ARGS)
	TPUC_BENCH_RESULTS_DIR="$(CURDIR)/$(BENCH_RESULTS)" $(PYTHON) bench/bench_compile.py $(BENCH_COMPILE_ARGS)
	TPUC_BENCH_RESULTS_DIR="$(CURDIR)/$(BENCH_RESULTS)" $(PYTHON) bench/bench_distributed.py $(BENCH_DISTRIBUTED_ARGS)
	TPUC_BENCH_RESULTS_DIR="$(CURDIR)/$(BENCH_RESULTS)" $(PYTHON) bench/bench_first_use.py $(BENCH_FIRST_USE_ARGS)
	$(PYTHON) scripts/bench_table.py $(BENCH_RESULTS)

# BENCH_FIRST_USE_ARGS: e.g. --rounds 2, --workloads suite.
bench-first-use: build
	mkdir -p $(BENCH_RESULTS)
	TPUC_BENCH_RESULTS_DIR="$(CURDIR)/$(BENCH_RESULTS)" $(PYTHON) bench/bench_first_use.py $(BENCH_FIRST_USE_ARGS)
	$(PYTHON) scripts/bench_table.py $(BENCH_RESULTS)

bench-device: build
	mkdir -p $(BENCH_RESULTS)
	TPUC_BENCH_RESULTS_DIR="$(CURDIR)/$(BENCH_RESULTS)" $(PYTHON) bench/bench_device.py
	$(PYTHON) scripts/bench_table.py $(BENCH_RESULTS)

bench-runtime: build
	mkdir -p $(BENCH_RESULTS)
	TPUC_BENCH_RESULTS_DIR="$(CURDIR)/$(BENCH_RESULTS)" ./build/bench_runtime
	$(PYTHON) scripts/bench_table.py $(BENCH_RESULTS)

# BENCH_EAGER_ARGS: e.g. --models gpt2_2layer --quick (the full run takes long).
bench-eager: build
	mkdir -p $(BENCH_RESULTS)
	TPUC_BENCH_RESULTS_DIR="$(CURDIR)/$(BENCH_RESULTS)" $(PYTHON) bench/bench_eager.py $(BENCH_EAGER_ARGS)
	$(PYTHON) scripts/bench_table.py $(BENCH_RESULTS)

# BENCH_DISTRIBUTED_ARGS: e.g. --quick (sizes to 16 MiB, 2-layer GPT-2).
bench-distributed: build
	mkdir -p $(BENCH_RESULTS)
	TPUC_BENCH_RESULTS_DIR="$(CURDIR)/$(BENCH_RESULTS)" $(PYTHON) bench/bench_distributed.py $(BENCH_DISTRIBUTED_ARGS)
	$(PYTHON) scripts/bench_table.py $(BENCH_RESULTS)

# BENCH_COMPILE_ARGS: e.g. --models tiny,gpt2_2layer --quick.
bench-compile: build
	mkdir -p $(BENCH_RESULTS)
	TPUC_BENCH_RESULTS_DIR="$(CURDIR)/$(BENCH_RESULTS)" $(PYTHON) bench/bench_compile.py $(BENCH_COMPILE_ARGS)
	$(PYTHON) scripts/bench_table.py $(BENCH_RESULTS)

format:
	find $(wildcard $(FORMAT_DIRS)) -type f \
	  \( -name '*.c' -o -name '*.h' -o -name '*.cc' -o -name '*.cpp' \
	     -o -name '*.hpp' \) -print0 | xargs -0 -r clang-format -i

clean:
	rm -rf build build-asan build-fuzz

distclean: clean
	rm -rf .venv
