# Placer — `make help` lists the targets.
# A fresh machine needs only python3 (3.11+) and make: every target sets up .venv first.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.DEFAULT_GOAL := help
.PHONY: help install test lint demo bench bench-engine bench-simulate bench-e2e bench-preemption

help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | sort | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-20s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -e '.[test]'
	@touch $@

install: $(STAMP) ## create .venv and install Placer with its test tools

test: install ## set up and run the whole test suite
	$(VENV)/bin/pytest $(PYTEST_ARGS)

lint: install ## ruff over the code
	$(VENV)/bin/ruff check .

demo: install ## set up and run `placer simulate` on the bundled sample cluster
	$(VENV)/bin/placer simulate --cluster examples/cluster.yaml --profile examples/profiles/all.yaml

bench: bench-engine bench-preemption bench-simulate bench-e2e bench-soak ## all benchmarks: engine alone, preemption, simulate, end to end, soak with faults

bench-engine: install ## engine only: default profile, 1,000 and 5,000 nodes, medians of 5 runs
	$(PY) bench/engine_bench.py --runs 5 --json bench/results/engine.json

bench-preemption: install ## one preemption at 1,000 nodes full of lower-priority pods, medians of 5
	$(PY) bench/preemption_bench.py --runs 5 --json bench/results/preemption.json

bench-simulate: install ## `placer simulate -o json`: 1,000 nodes, 2,000 pending pods, phases timed, medians of 5
	$(PY) bench/simulate_bench.py --runs 5 --json bench/results/simulate.json

-include mk/*.mk

bench-e2e: install ## end to end: `placer run` vs the emulated API server, 1,000 nodes, 5,000 pods, medians of 3
	$(PY) bench/e2e_bench.py --runs 3 --json bench/results/e2e.json

bench-soak: install ## soak (about 3 min): churn + injected faults on two replicas; audit lost/double/overcommitted
	$(PY) bench/soak_bench.py --minutes 3 --json bench/results/soak.json
