# streamstate's one task file: the README, CI (.ci/run), pre-commit (.pre-commit-config.yaml) and
# developers all call these targets.
# `make help` lists them. Everything installs into ./.venv; downloads (Kafka and Spark connector
# jars, Rust build output) are cached under $(CACHE) so a second run is fast.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
CACHE ?= $(HOME)/.cache/streamstate
PY := $(VENV)/bin/python
# The Quix Streams peer benchmark runs in a virtualenv of its own (its confluent-kafka pin).
VENV_QUIX ?= .venv-quix
# The Spark suites run twice: on the oldest supported pyspark (constraints.txt, in $(VENV)) and on
# the newest (here, in a venv of its own with constraints.txt's other pins); the two ends of the
# `spark` extra's range, which streamstate.spark._session.TESTED_SPARK_VERSIONS lists.
SPARK_NEWEST := 4.2.0
VENV_SPARK_NEWEST ?= .venv-spark-$(SPARK_NEWEST)
export STREAMSTATE_QUIX_PYTHON := $(abspath $(VENV_QUIX)/bin/python)
# Rust build output lives in the cache: a fresh clone then rebuilds only what changed.
export CARGO_TARGET_DIR ?= $(CACHE)/target
export STREAMSTATE_CACHE_DIR ?= $(CACHE)
# Spark's Python workers must run this venv's interpreter, which has the extension.
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))
export PIP_DISABLE_PIP_VERSION_CHECK := 1

# Packages of pyproject.toml's runtime deps and the `spark`, `prometheus` and `dev` extras, pinned
# by constraints.txt; the extension itself is built by maturin (target `build`).
DEPS := confluent-kafka pyarrow pyspark pandas prometheus-client maturin pytest pytest-benchmark pytest-xdist hypothesis ruff mypy

.PHONY: help setup build demo test check lint test-rust test-python test-spark-newest wheel bench bench-quick kstreams clean chaos-full fuzz

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-18s %s\n", $$1, $$2}'

$(VENV)/.deps: constraints.txt pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 10), "streamstate needs Python >= 3.10, got " + sys.version'
	@command -v cargo >/dev/null || { echo "Rust (cargo) is required: https://rustup.rs"; exit 1; }
	@command -v java >/dev/null || { echo "Java 17+ is required for Kafka and Spark"; exit 1; }
	@command -v mvn >/dev/null || { echo "Maven (mvn) is required to fetch the Kafka jars"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt $(DEPS)
	touch $@

# pyspark and py4j (pyspark's own pin) come from the newest pyspark; the rest from constraints.txt.
$(VENV_SPARK_NEWEST)/.deps: constraints.txt pyproject.toml $(VENV)/.deps
	test -x $(VENV_SPARK_NEWEST)/bin/python || $(PYTHON) -m venv $(VENV_SPARK_NEWEST)
	$(VENV_SPARK_NEWEST)/bin/python -m pip install -q --upgrade pip
	$(VENV_SPARK_NEWEST)/bin/python -m pip install -q \
	  -c <(grep -v -E '^(pyspark|py4j)==' constraints.txt) pyspark==$(SPARK_NEWEST) \
	  confluent-kafka pyarrow pandas numpy pytest pytest-benchmark hypothesis
	touch $@

$(VENV_QUIX)/.deps: constraints-quix.txt
	test -x $(VENV_QUIX)/bin/python || $(PYTHON) -m venv $(VENV_QUIX)
	$(VENV_QUIX)/bin/python -m pip install -q --upgrade pip
	$(VENV_QUIX)/bin/python -m pip install -q -c constraints-quix.txt quixstreams
	touch $@

setup: build ## create .venv, install the pinned dependencies, build the extension (release)

build: $(VENV)/.deps ## (re)build the Rust extension in release mode into .venv
	VIRTUAL_ENV=$(abspath $(VENV)) $(VENV)/bin/maturin develop --release --locked -q

# The wheel for clusters (README, "Building and shipping a wheel"): the `dist` profile (fat LTO),
# OpenSSL and zlib built in (feature `vendored`), linked by zig against glibc 2.28's symbols so
# that the wheel is manylinux_2_28 whatever glibc this machine has. A first build costs ~15 min
# of CPU (OpenSSL included); cargo's cache ($(CARGO_TARGET_DIR)) then rebuilds what changed (a
# change to the binding crate: ~2 min of CPU, mostly the LTO link).
# maturin, zig (`ziglang` from PyPI) and the interpreter it builds for live in a venv of their own
# at a fixed path in $(CACHE), not in $(VENV): maturin hands cargo compiler wrappers whose
# directory is named by a hash of maturin's and zig's paths, and build scripts re-run when CC
# changes, so with the tools in each clone's $(VENV) every fresh clone rebuilt all ~176 crates.
WHEEL_TOOLS := $(CACHE)/wheel-tools
$(WHEEL_TOOLS)/.tools: constraints.txt
	test -x $(WHEEL_TOOLS)/bin/python || $(PYTHON) -m venv $(WHEEL_TOOLS)
	$(WHEEL_TOOLS)/bin/python -m pip install -q -c constraints.txt maturin ziglang
	touch $@

# auditwheel in $(VENV): tests/test_wheel.py checks the wheel with it.
$(VENV)/.wheel-tools: $(VENV)/.deps $(WHEEL_TOOLS)/.tools
	$(PY) -m pip install -q -c constraints.txt auditwheel
	touch $@

wheel: $(VENV)/.wheel-tools ## build dist/streamstate-*.whl: abi3, manylinux_2_28, self-contained
	rm -f dist/streamstate-*.whl
	PATH="$(WHEEL_TOOLS)/bin:$$PATH" $(WHEEL_TOOLS)/bin/maturin build --profile dist --zig \
	  --compatibility manylinux_2_28 --features vendored --locked -i $(WHEEL_TOOLS)/bin/python \
	  --out dist
	$(VENV)/bin/auditwheel show dist/streamstate-*.whl

demo: setup ## set up, start the local Kafka and run the end-to-end tour
	$(VENV)/bin/streamstate demo

lint: $(VENV)/.deps ## rustfmt, clippy, ruff, mypy
	cargo fmt --all --check
	# --release: shares the release build's librdkafka (a C build) instead of compiling it again.
	cargo clippy --workspace --all-targets --release --locked -- -D warnings
	$(VENV)/bin/ruff check python tests benches
	$(VENV)/bin/ruff format --check python tests benches
	$(VENV)/bin/mypy
	@# pytest imports test modules by basename (no __init__.py): two files of one name in different
	@# folders stop the whole collection, as a CI run once did (tests/unit and tests/spark).
	@dups="$$(find tests benches -name '*.py' ! -name conftest.py -printf '%f\n' | sort | uniq -d)"; \
	  test -z "$$dups" || { echo "test modules sharing a basename: $$dups"; exit 1; }

# streamstate-core's tests include the short form of `make fuzz` (rust/core/tests/fuzz.rs, 10,000
# payloads per target, in a debug build: overflow checks and debug assertions on).
test-rust: ## cargo test of the pure-Rust crates (core, streams group protocol) and of the changelog fetch (librdkafka mock cluster)
	cargo test -p streamstate-core --locked
	cargo test -p streamstate-group --locked
	cargo test --release -p streamstate-fetch --locked

# Bad input at scale (docs/bad-input.md): every decode entry point of the Rust core a record's
# bytes reach, 10^6 generated payloads each (STREAMSTATE_FUZZ_CASES overrides; the seed is
# printed, STREAMSTATE_FUZZ_SEED / STREAMSTATE_FUZZ_CASE replay), in a release build for speed.
fuzz: ## 10^6 generated bad payloads through each deserializer and timestamp extractor of the Rust core
	STREAMSTATE_FUZZ_CASES=$${STREAMSTATE_FUZZ_CASES:-1000000} cargo test --release --locked \
	  -p streamstate-core --test fuzz -- --nocapture --test-threads=2

# The benchmarks' peers outside Python: Kafka Streams itself (jars fetched by Maven into $(CACHE),
# benches/kstreams/*.java compiled by javac there, only when they change) and kcat, librdkafka's
# C client, from the distribution's packages (CI runs as root on a fresh machine).
kstreams: build ## Kafka Streams' jars and the Java peers of benches/kstreams; kcat (apt-get)
	@command -v kcat >/dev/null || { echo "installing kcat (apt-get)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >/dev/null; }
	$(PY) -m benches._kstreams prepare

# --durations: CI's log then says where make test's time goes (its budget is ~35 minutes).
# The suites run on two pytest-xdist workers (PYTEST_WORKERS), each with its own broker and
# Spark session (tests/conftest.py's session fixtures); --dist loadfile hands out whole units in
# the order named (--no-loadscope-reorder): a test module is a unit, tests/chaos one (its
# scenarios one at a time) and tests/spark one (one Spark JVM), as tests/conftest.py's
# scheduler says: 17-18 min here, where one worker takes 27. The wheel is built first, then: two
# workers keep both cores busy, and with the wheel's build beside them (15 min of both cores on
# a machine whose cargo cache is cold; ~2 min once warm, `wheel`) three tests outran their
# generous waits (an exactly-once word count across a SIGKILL, a foreign-key join: 90 s each).
# PYTEST_WORKERS=1 runs one worker with the wheel building in the background meanwhile (the
# suites spend most of their time waiting on the broker, Spark and the apps they start).
PYTEST_WORKERS ?= 2
PYTEST_DIST := $(if $(filter-out 1,$(PYTEST_WORKERS)),-n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder)
WHEEL_LOG := $(abspath dist)/wheel-build.log
test-python: build kstreams $(VENV)/.wheel-tools ## every pytest suite: unit, integration (real Kafka), spark (real Spark), the wheel
	$(VENV)/bin/python -m mypy.stubtest streamstate._core --mypy-config-file pyproject.toml
	@# Every suite directory is named below (the unit tests first): a test module put straight
	@# into tests/ would not run.
	@extra="$$(ls tests/test_*.py | grep -v -x tests/test_wheel.py || true)"; \
	  test -z "$$extra" || { echo "tests/ holds test modules outside its suites: $$extra"; exit 1; }
	mkdir -p dist
	@suites="tests/unit tests/chaos tests/integration tests/spark"; \
	if [ -n "$(PYTEST_DIST)" ]; then \
	  echo "make wheel (log: $(WHEEL_LOG))"; \
	  $(MAKE) --no-print-directory wheel > $(WHEEL_LOG) 2>&1 || { cat $(WHEEL_LOG); exit 1; }; \
	  tail -n 3 $(WHEEL_LOG); \
	  echo "$(VENV)/bin/pytest $(PYTEST_DIST) $$suites --durations=30"; \
	  $(VENV)/bin/pytest $(PYTEST_DIST) $$suites --durations=30; \
	else \
	  $(MAKE) --no-print-directory wheel > $(WHEEL_LOG) 2>&1 & wheel=$$!; \
	  status=0; $(VENV)/bin/pytest $$suites --durations=30 || status=$$?; \
	  wait $$wheel || { echo "make wheel failed:"; cat $(WHEEL_LOG); exit 1; }; \
	  tail -n 3 $(WHEEL_LOG); exit $$status; \
	fi
	STREAMSTATE_WHEEL="$$(ls $(abspath dist)/streamstate-*.whl)" $(VENV)/bin/pytest tests/test_wheel.py

# Only tests/spark here: the rest does not depend on pyspark's version, and CI's time is bounded.
# streamstate itself is $(VENV)'s editable install (maturin develop's .pth and metadata), copied:
# the extension `make build` put into python/streamstate is abi3, so this venv's CPython loads
# it, and a second maturin develop would rebuild the Rust crates for the other interpreter.
test-spark-newest: build $(VENV_SPARK_NEWEST)/.deps ## the Spark suites on the newest supported pyspark
	site_new="$$($(VENV_SPARK_NEWEST)/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"; \
	site_dev="$$($(PY) -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"; \
	rm -rf "$$site_new"/streamstate-*.dist-info; \
	cp -r "$$site_dev"/streamstate.pth "$$site_dev"/streamstate-*.dist-info "$$site_new"/
	PYSPARK_PYTHON="$(abspath $(VENV_SPARK_NEWEST))/bin/python" \
	PYSPARK_DRIVER_PYTHON="$(abspath $(VENV_SPARK_NEWEST))/bin/python" \
	  $(VENV_SPARK_NEWEST)/bin/pytest tests/spark

chaos-full: build ## the chaos scenarios at full size (a 1M-record backlog, 24 SIGKILLs; prints peak RSS)
	STREAMSTATE_CHAOS_FULL=1 $(VENV)/bin/pytest tests/chaos -s -q

# --durations: most of bench-quick's time is set-up (brokers, JVMs, Spark sessions, producing
# inputs), which the benchmark tables do not show; CI's log then says where it goes.
bench-quick: build kstreams $(VENV_QUIX)/.deps ## the benchmark suite on small inputs, printing the comparison tables
	STREAMSTATE_BENCH_QUICK=1 $(VENV)/bin/pytest benches --durations=15 --benchmark-enable \
	  --benchmark-warmup=off --benchmark-min-rounds=3 --benchmark-max-time=0.2 \
	  --benchmark-columns=min,median,mean,rounds --benchmark-group-by=group --benchmark-sort=mean

bench: build kstreams $(VENV_QUIX)/.deps ## the full benchmark suite (1M records; see docs/PERFORMANCE.md)
	$(VENV)/bin/pytest benches --benchmark-enable --benchmark-group-by=group \
	  --benchmark-columns=min,median,mean,rounds --benchmark-sort=mean

test: lint test-rust test-python test-spark-newest bench-quick ## set up and run everything CI runs
	@echo "all checks passed"

clean: ## remove the venv and build output (the download cache stays)
	rm -rf $(VENV) $(VENV_SPARK_NEWEST) dist .pytest_cache .mypy_cache .ruff_cache
	cargo clean
