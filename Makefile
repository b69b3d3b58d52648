# One entry point for people and CI: `make demo` runs the main job, `make test` the whole suite.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin

.PHONY: setup demo test lint docs bench reproduce clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

demo: setup
	$(BIN)/uss-stream replay --out out/replay

reproduce: setup
	$(BIN)/python -m studies.reproduce --out docs

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check uss_stream connectors studies tests benchmarks examples

# The documentation site (mkdocs.yml): the README's guide, docs/*.md and the API reference from the
# docstrings; --strict fails on any broken link or cross-reference.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

test: lint docs
	bash deploy/kafka/with-broker.sh $(BIN)/python -m pytest

bench: setup
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info site
