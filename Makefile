# PY=python3.13 (or a path) builds and tests with that interpreter, in a virtual
# environment of its own (.venv-python3.13); the default python3 uses .venv.
PY ?= python3
VENV := .venv$(if $(filter-out python3,$(PY)),-$(notdir $(PY)))
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo demo-fleet test test-core check bench diagrams clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m workflows.refund demo

demo-fleet: $(STAMP)
	$(BIN)/python -m workflows.refund fleet-demo

test: $(STAMP)
	$(BIN)/python -m pytest

# The core alone: no PostgreSQL, no workers, no inbox (see the markers in tests/conftest.py).
test-core: $(STAMP)
	$(BIN)/python -m pytest -m "not postgres and not services"

check: $(STAMP)
	$(BIN)/ruff check fsm workflows tests bench
	$(BIN)/mypy fsm
	$(BIN)/lint-imports

$(VENV)/.bench-installed: $(STAMP)
	$(BIN)/pip install --quiet -e '.[bench]'
	touch $@

# The peers' own environments are made on first use, under bench/.peers/.
bench: $(VENV)/.bench-installed
	$(BIN)/python bench/imports.py
	$(BIN)/python bench/steps.py
	$(BIN)/python bench/peers.py --json-out bench/peers.json
	$(BIN)/python bench/profile_step.py --runs 100 --top 15
	$(BIN)/python bench/pg_steps.py
	$(BIN)/python bench/fleet.py

diagrams: $(STAMP)
	$(BIN)/fsm diagram refund -o diagrams/refund.dot
	$(BIN)/fsm diagram refund -o diagrams/refund.svg
	$(BIN)/fsm diagram refund -o diagrams/refund.mmd
	$(BIN)/fsm diagram refund -o diagrams/refund.md
	$(BIN)/fsm verify refund -o diagrams/refund-verification.md

clean:
	rm -rf .venv .venv-* .pytest_cache .mypy_cache .ruff_cache
