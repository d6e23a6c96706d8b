# The placement benchmark (docs/gang.md "Topology"): how many rack-bound gangs kube's placement
# choice and TopologyPlacementGenerator's BestFit place on a rack-shaped cluster. Included from the
# top-level Makefile (`-include mk/*.mk`), which defines PY; the default below applies otherwise.

PY ?= .venv/bin/python

.PHONY: bench-placement
bench-placement: ## gangs placed inside one rack: kube's choice, BestFit, PodGroupPodsCount alone; 5 seeds
	$(PY) bench/placement_bench.py --seeds 5 --json bench/results/placement.json
