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
export STREAMSTATE_QUIX_PYTHON := $(abspath $(VENV_QUIX)/bin/python)
# Rust build output lives in the cache: a fresh clone then rebuilds only what changed.
export CARGO_TARGET_DIR ?= $(CACHE)/target
export STREAMSTATE_CACHE_DIR ?= $(CACHE)
# Spark's Python workers must run this venv's interpreter, which has the extension.
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))
export PIP_DISABLE_PIP_VERSION_CHECK := 1

# Packages of pyproject.toml's runtime deps and the `spark` and `dev` extras, pinned by
# constraints.txt; the extension itself is built by maturin (target `build`).
DEPS := confluent-kafka pyarrow pyspark pandas maturin pytest pytest-benchmark hypothesis ruff mypy

.PHONY: help setup build demo test check lint test-rust test-python bench bench-quick kstreams clean chaos-full

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

$(VENV)/.deps: constraints.txt pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 10), "streamstate needs Python >= 3.10, got " + sys.version'
	@command -v cargo >/dev/null || { echo "Rust (cargo) is required: https://rustup.rs"; exit 1; }
	@command -v java >/dev/null || { echo "Java 17+ is required for Kafka and Spark"; exit 1; }
	@command -v mvn >/dev/null || { echo "Maven (mvn) is required to fetch the Kafka jars"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt $(DEPS)
	touch $@

$(VENV_QUIX)/.deps: constraints-quix.txt
	test -x $(VENV_QUIX)/bin/python || $(PYTHON) -m venv $(VENV_QUIX)
	$(VENV_QUIX)/bin/python -m pip install -q --upgrade pip
	$(VENV_QUIX)/bin/python -m pip install -q -c constraints-quix.txt quixstreams
	touch $@

setup: build ## create .venv, install the pinned dependencies, build the extension (release)

build: $(VENV)/.deps ## (re)build the Rust extension in release mode into .venv
	VIRTUAL_ENV=$(abspath $(VENV)) $(VENV)/bin/maturin develop --release --locked -q

demo: setup ## set up, start the local Kafka and run the end-to-end tour
	$(VENV)/bin/streamstate demo

lint: $(VENV)/.deps ## rustfmt, clippy, ruff, mypy
	cargo fmt --all --check
	# --release: shares the release build's librdkafka (a C build) instead of compiling it again.
	cargo clippy --workspace --all-targets --release --locked -- -D warnings
	$(VENV)/bin/ruff check python tests benches
	$(VENV)/bin/ruff format --check python tests benches
	$(VENV)/bin/mypy

test-rust: ## cargo test of the pure-Rust crates (core, streams group protocol) and of the changelog fetch (librdkafka mock cluster)
	cargo test -p streamstate-core --locked
	cargo test -p streamstate-group --locked
	cargo test --release -p streamstate-fetch --locked

# The benchmarks' peers outside Python: Kafka Streams itself (jars fetched by Maven into $(CACHE),
# benches/kstreams/*.java compiled by javac there, only when they change) and kcat, librdkafka's
# C client, from the distribution's packages (CI runs as root on a fresh machine).
kstreams: build ## Kafka Streams' jars and the Java peers of benches/kstreams; kcat (apt-get)
	@command -v kcat >/dev/null || { echo "installing kcat (apt-get)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >/dev/null; }
	$(PY) -m benches._kstreams prepare

test-python: build kstreams ## every pytest suite: unit, integration (real Kafka), spark (real Spark)
	$(VENV)/bin/python -m mypy.stubtest streamstate._core --mypy-config-file pyproject.toml
	$(VENV)/bin/pytest tests

chaos-full: build ## the chaos scenarios at full size (a 1M-record backlog, 24 SIGKILLs; prints peak RSS)
	STREAMSTATE_CHAOS_FULL=1 $(VENV)/bin/pytest tests/chaos -s -q

bench-quick: build kstreams $(VENV_QUIX)/.deps ## the benchmark suite on small inputs, printing the comparison tables
	STREAMSTATE_BENCH_QUICK=1 $(VENV)/bin/pytest benches --benchmark-enable \
	  --benchmark-warmup=off --benchmark-min-rounds=3 --benchmark-max-time=0.2 \
	  --benchmark-columns=min,median,mean,rounds --benchmark-group-by=group --benchmark-sort=mean

bench: build kstreams $(VENV_QUIX)/.deps ## the full benchmark suite (1M records; see docs/PERFORMANCE.md)
	$(VENV)/bin/pytest benches --benchmark-enable --benchmark-group-by=group \
	  --benchmark-columns=min,median,mean,rounds --benchmark-sort=mean

test: lint test-rust test-python bench-quick ## set up and run everything CI runs
	@echo "all checks passed"

clean: ## remove the venv and build output (the download cache stays)
	rm -rf $(VENV) dist .pytest_cache .mypy_cache .ruff_cache
	cargo clean
