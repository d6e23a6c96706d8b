# Placer — `make help` lists the targets.
# A fresh machine needs only python3 (3.11+) and make: every target sets up .venv first.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
STAMP := $(VENV)/.installed
# the example plugin package (examples/plugins/): installed beside Placer, its tests run with the suite;
# installed as a user would (not editable: setuptools' editable install of a single module is an import
# hook that every `python` of the venv loads, about 30 ms of each `placer run`'s start), so again
# whenever its module changes
PLUGIN_EXAMPLE := examples/plugins/annotation-score
PYTEST_ARGS ?=

.DEFAULT_GOAL := help
.PHONY: help install test lint demo bench bench-engine bench-simulate bench-e2e bench-preemption bench-gang bench-shadow bench-real bench-real-synthetic bench-first-binding bench-pipeline check-real check-cluster check-cluster-bursts

help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | sort | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-20s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml $(PLUGIN_EXAMPLE)/pyproject.toml $(PLUGIN_EXAMPLE)/placer_annotation_score.py
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -e '.[test]'
	$(PIP) install --quiet $(PLUGIN_EXAMPLE)
	@touch $@

install: $(STAMP) ## create .venv and install Placer with its test tools

# What the image installs (the Dockerfile: the lock, then Placer's wheel; no test tools, no example
# plugin): the real-plane benchmarks run `placer run` from here, so its start-up is the shipped one
RUN_VENV := .venv-run
RUN_STAMP := $(RUN_VENV)/.installed
$(RUN_STAMP): pyproject.toml requirements.lock $(shell find operator -name '*.py' -not -name '*_test.py')
	$(PYTHON) -m venv $(RUN_VENV)
	$(RUN_VENV)/bin/pip install --quiet --upgrade pip
	$(RUN_VENV)/bin/pip install --quiet --no-deps -r requirements.lock
	$(RUN_VENV)/bin/pip install --quiet --no-deps --force-reinstall .
	$(RUN_VENV)/bin/python -m compileall -q $(RUN_VENV)/lib > /dev/null
	@touch $@

test: install ## set up and run the whole test suite
	$(VENV)/bin/pytest $(PYTEST_ARGS)

lint: install ## ruff over the code
	$(VENV)/bin/ruff check .

demo: install ## set up and run `placer simulate` on the bundled sample cluster
	$(VENV)/bin/placer simulate --cluster examples/cluster.yaml --profile examples/profiles/all.yaml

bench: bench-engine bench-preemption bench-gang bench-simulate bench-e2e bench-shadow bench-soak ## all benchmarks: engine alone, preemption, a gang, simulate, end to end, shadow profile cost, soak with faults

bench-engine: install ## engine only: default profile, 1,000 and 5,000 nodes, synthetic and kube's scheduler_perf pods, with and without opportunistic batching, medians of 5 runs
	$(PY) bench/engine_bench.py --runs 5 --workloads plain,relations,claims,kube-basic,kube-nodeaffinity \
		--batching both --json bench/results/engine.json

bench-preemption: install ## one preemption at 1,000 nodes full of lower-priority pods, kube's PreemptionBasic at 5,000 nodes (CPU per preemptor along the workload), then at 500 with 0 and 150 preemptions outstanding (and with budgets), medians of 5, 3 and 3
	$(PY) bench/preemption_bench.py --runs 5 --json bench/results/preemption.json
	$(PY) bench/preemption_bench.py --shape basic --nodes 5000 --runs 3 --preemptors 10 \
		--json bench/results/preemption-basic-5000.json
	$(PY) bench/preemption_bench.py --shape waves --nodes 500 --outstanding 0 --preemptors 450 --runs 3 \
		--json bench/results/preemption-waves-500-0.json
	$(PY) bench/preemption_bench.py --shape waves --nodes 500 --outstanding 150 --preemptors 450 --runs 3 \
		--json bench/results/preemption-waves-500-150.json
	$(PY) bench/preemption_bench.py --shape waves --nodes 500 --outstanding 0 --preemptors 300 --runs 3 --budget \
		--json bench/results/preemption-waves-500-pdb.json

bench-gang: install ## a gang of 100 pods decided on 1,000 nodes (and the same pods one by one), medians of 5
	$(PY) bench/gang_bench.py --runs 5 --json bench/results/gang.json

bench-simulate: install ## `placer simulate -o json`: 1,000 nodes, 2,000 pending pods, phases timed, medians of 5
	$(PY) bench/simulate_bench.py --runs 5 --json bench/results/simulate.json

-include mk/*.mk

bench-e2e: install ## end to end: `placer run` vs the emulated API server, 1,000 nodes, 5,000 pods, medians of 3
	$(PY) bench/e2e_bench.py --runs 3 --json bench/results/e2e.json

bench-shadow: install ## a shadow profile's cost: the active profile with and without one, beside a fake default-scheduler, medians of 3
	$(PY) bench/e2e_bench.py --runs 3 --shadow --json bench/results/e2e-shadow.json

bench-soak: install ## soak (about 3 min): churn + injected faults on two replicas; audit lost/double/overcommitted
	$(PY) bench/soak_bench.py --minutes 3 --json bench/results/soak.json

# A real control plane (../shared/realcluster/: etcd + kube-apiserver, no kubelets), never part of
# `make test` or CI. KUBE_BIN is the folder ../shared/realcluster/build.sh filled: by default
# ../kube-bin-$(KUBE_VERSION), and KUBE_VERSION is 1.36 (the reference); KUBE_VERSION=1.24 (the
# oldest supported) or KUBE_BIN=DIR pick another build (docs/performance.md, docs/versions.md).
KUBE_VERSION ?= 1.36
KUBE_BIN ?= ../kube-bin-$(KUBE_VERSION)
REAL_RUNS ?= 3
REAL_SIZES ?= 1000x5000 5000x10000
REAL_MODES ?= backlog stream
# the large size, all pods first, on one control plane for every run (filled once: its namespace
# emptied between runs); REAL_LARGE_SIZES= leaves it out
REAL_LARGE_SIZES ?= 15000x30000
# stream mode: pods created at this fixed rate, scheduling latency (p50/p99) reported
REAL_STREAM_RATE ?= 250
# scheduler_perf-like workloads beside `plain` (bench/real_bench.py's docstring), at their own
# size and mode; REAL_WORKLOADS= runs `plain` only. `devices` (DRA) is skipped before v1.34.
REAL_WORKLOADS ?= antiaffinity spread preferred devices
REAL_WORKLOAD_SIZES ?= 1000x5000
REAL_WORKLOAD_MODES ?= backlog
# the version the binaries report (kube-apiserver --version), in the results' file names
REAL_VERSION = $(shell $(KUBE_BIN)/kube-apiserver --version 2>/dev/null | sed -n 's/^Kubernetes \(v[0-9]*\.[0-9]*\).*/\1/p')
# kube-scheduler's own performance suite (test/integration/scheduler_perf, read at run time from the
# Kubernetes source in KUBE_SOURCE: a git directory such as the search tool's mirror of
# openshift/microshift, or a Kubernetes tree), replayed by bench/suite_bench.py: every test case
# of SUITE_WORKLOADS (empty: the issue's list, bench/suite_bench.py's DEFAULT_WORKLOADS; `all`: every
# one) at SUITE_SIZES nodes, then SUITE_LARGE at SUITE_LARGE_SIZES, in SUITE_MODES, SUITE_RUNS runs,
# Placer, kube-scheduler and the limit row each alone on a fresh plane. SUITE_SCALE shrinks every
# count further (0.1: a quick check that each workload runs). The plane's ports and folder are
# realcluster.sh's RC_PORT, RC_ETCD_PORT and RC_DIR, taken from the environment.
KUBE_SOURCE ?= ../.mirror/openshift+microshift/repo
SUITE_WORKLOADS ?=
SUITE_SIZES ?= 500
SUITE_LARGE ?= SchedulingBasic PreemptionBasic
SUITE_LARGE_SIZES ?= 5000
SUITE_MODES ?= waiting during
SUITE_RUNS ?= 1
SUITE_SCALE ?= 1
# seconds between a contender's start and the first op (kube's suite starts its scheduler first)
SUITE_SETTLE ?= 0
empty :=
space := $(empty) $(empty)
# the results' file name: the sizes joined by '-', and the scale when not 1
suite_json = bench/results/suite-$(REAL_VERSION)-$(subst $(space),-,$(strip $(1)))$(if $(filter-out 1,$(SUITE_SCALE)),-x$(SUITE_SCALE)).json
SUITE = $(PY) bench/suite_bench.py --kube-bin $(KUBE_BIN) --kube-source $(KUBE_SOURCE) --modes $(SUITE_MODES) \
	--runs $(SUITE_RUNS) --scale $(SUITE_SCALE) --settle $(SUITE_SETTLE)
bench-real: install $(RUN_STAMP) ## kube's own performance suite (scheduler_perf from KUBE_SOURCE) on a real v1.36 plane: Placer vs kube-scheduler vs the limit row, both creation modes; all at 500 nodes, SchedulingBasic and PreemptionBasic at 5,000 too (about 3 h on 2 cores; SUITE_* variables, docs/performance.md)
	@test -x "$(KUBE_BIN)/kube-apiserver" || { echo "KUBE_BIN=$(KUBE_BIN): no kube-apiserver; build one with ../shared/realcluster/build.sh (docs/performance.md)"; exit 2; }
	$(SUITE) $(if $(strip $(SUITE_WORKLOADS)),--workloads $(SUITE_WORKLOADS)) --sizes $(SUITE_SIZES) \
		--json $(call suite_json,$(SUITE_SIZES))
	$(if $(strip $(SUITE_LARGE)),$(SUITE) --workloads $(SUITE_LARGE) --sizes $(SUITE_LARGE_SIZES) \
		--json $(call suite_json,$(SUITE_LARGE_SIZES)))

bench-real-synthetic: install $(RUN_STAMP) ## the earlier real-plane runs (bench/synthetic.py's workloads, quoted in docs/performance.md): Placer vs kube-scheduler vs the limit row (a bare bind-and-event client) on a real API server (v1.36; KUBE_VERSION=1.24 or KUBE_BIN=DIR): plain at both sizes and modes (stream paced at 250 pods/s: latency), 15,000/30,000 backlog, then antiaffinity/spread/preferred/devices at 1,000/5,000 backlog, medians of 3
	@test -x "$(KUBE_BIN)/kube-apiserver" || { echo "KUBE_BIN=$(KUBE_BIN): no kube-apiserver; build one with ../shared/realcluster/build.sh (docs/performance.md)"; exit 2; }
	@for size in $(REAL_SIZES); do for mode in $(REAL_MODES); do \
		nodes=$${size%x*}; pods=$${size#*x}; \
		$(PY) bench/real_bench.py --kube-bin $(KUBE_BIN) --nodes $$nodes --pods $$pods --mode $$mode \
			--rate $(REAL_STREAM_RATE) --runs $(REAL_RUNS) \
			--json bench/results/real-$(REAL_VERSION)-$$nodes-$$pods-$$mode.json || exit 1; \
	done; done
	@for size in $(REAL_LARGE_SIZES); do \
		nodes=$${size%x*}; pods=$${size#*x}; \
		$(PY) bench/real_bench.py --kube-bin $(KUBE_BIN) --nodes $$nodes --pods $$pods --mode backlog \
			--reuse-plane --timeout 900 --runs $(REAL_RUNS) \
			--json bench/results/real-$(REAL_VERSION)-$$nodes-$$pods-backlog.json || exit 1; \
	done
	@for workload in $(REAL_WORKLOADS); do for size in $(REAL_WORKLOAD_SIZES); do for mode in $(REAL_WORKLOAD_MODES); do \
		nodes=$${size%x*}; pods=$${size#*x}; \
		$(PY) bench/real_bench.py --kube-bin $(KUBE_BIN) --nodes $$nodes --pods $$pods --mode $$mode \
			--workload $$workload --runs $(REAL_RUNS) \
			--json bench/results/real-$(REAL_VERSION)-$$nodes-$$pods-$$mode-$$workload.json \
			|| { status=$$?; [ $$status -eq 3 ] || exit 1; echo "(skipped: $$workload)"; }; \
	done; done; done

FIRST_BINDING_SIZES ?= 1000x5000 5000x10000 15000x30000
FIRST_BINDING_ROUNDS ?= 3
bench-first-binding: install $(RUN_STAMP) ## the first binding after a cold start at 1,000/5,000/15,000 nodes (twice as many pending pods), kube-scheduler and Placer started in turn on one plane per size, 3 rounds (FIRST_BINDING_SIZES, FIRST_BINDING_ROUNDS)
	@test -x "$(KUBE_BIN)/kube-apiserver" || { echo "KUBE_BIN=$(KUBE_BIN): no kube-apiserver; build one with ../shared/realcluster/build.sh (docs/performance.md)"; exit 2; }
	@for size in $(FIRST_BINDING_SIZES); do nodes=$${size%x*}; pods=$${size#*x}; \
		$(PY) bench/first_binding.py --kube-bin $(KUBE_BIN) --nodes $$nodes --pods $$pods --rounds $(FIRST_BINDING_ROUNDS) \
			--json bench/results/first-binding-$(REAL_VERSION)-$$nodes.json || exit 1; \
	done

bench-pipeline: install $(RUN_STAMP) ## the three-process prototype (bench/pipeline_prototype.py: reading, deciding, writing apart) beside Placer, kube-scheduler and the limit row at 1,000/5,000, each stage's CPU per pod, medians of 3
	@test -x "$(KUBE_BIN)/kube-apiserver" || { echo "KUBE_BIN=$(KUBE_BIN): no kube-apiserver; build one with ../shared/realcluster/build.sh (docs/performance.md)"; exit 2; }
	$(PY) bench/real_bench.py --kube-bin $(KUBE_BIN) --nodes 1000 --pods 5000 --mode backlog --prototype \
		--runs $(REAL_RUNS) --json bench/results/real-$(REAL_VERSION)-1000-5000-backlog-prototype.json

check-real: install ## the operator's scenarios on a real API server (v1.36; KUBE_VERSION=1.24 or KUBE_BIN=DIR): binding, events, gates, pod-level resources, resize, preemption, DRA...
	@test -x "$(KUBE_BIN)/kube-apiserver" || { echo "KUBE_BIN=$(KUBE_BIN): no kube-apiserver; build one with ../shared/realcluster/build.sh (docs/versions.md)"; exit 2; }
	$(PY) hack/real_check.py --kube-bin $(KUBE_BIN) --json bench/results/real-check-$(REAL_VERSION).json

# Whole-cluster scenarios (hack/cluster_check.py): hollow nodes (kubemark) and the real
# kube-controller-manager on a plane of ../shared/realcluster/, in both modes (Placer as a second
# scheduler beside kube-scheduler, and as the only one), each also run with kube-scheduler in Placer's
# part, then the switch kube-scheduler -> Placer -> kube-scheduler measured. Never part of `make test`:
# KUBE_BIN needs kube-apiserver, kube-scheduler, kube-controller-manager and kubemark
# (RC_EXTRA_CMDS="kube-controller-manager kubemark" ../shared/realcluster/build.sh). The plane's folder
# and ports: RC_DIR, RC_PORT, RC_ETCD_PORT, RC_HOLLOW_PORT (docs/operations.md).
RC_DIR ?= /tmp/rc-cluster
RC_PORT ?= 6743
RC_ETCD_PORT ?= 2679
RC_HOLLOW_PORT ?= 21000
CLUSTER_ENV = KUBE_BIN=$(abspath $(KUBE_BIN)) RC_DIR=$(RC_DIR) RC_PORT=$(RC_PORT) RC_ETCD_PORT=$(RC_ETCD_PORT) \
	RC_HOLLOW_PORT=$(RC_HOLLOW_PORT)
BURST_RUNS ?= 10
check-cluster: install ## whole-cluster scenarios on 4 hollow nodes + kube-controller-manager: Placer second and only scheduler, kube-scheduler in its part for comparison, the switch measured (about 15 min)
	@test -x "$(KUBE_BIN)/kubemark" -a -x "$(KUBE_BIN)/kube-controller-manager" || { echo "KUBE_BIN=$(KUBE_BIN): no kubemark or kube-controller-manager; build them with RC_EXTRA_CMDS=\"kube-controller-manager kubemark\" ../shared/realcluster/build.sh (docs/operations.md)"; exit 2; }
	$(CLUSTER_ENV) $(PY) hack/cluster_check.py --handover --json bench/results/cluster-check-$(REAL_VERSION).json

check-cluster-bursts: install ## the second-scheduler case counted: bursts of 20 pods filling 4 hollow nodes, kubelet rejections per run (BURST_RUNS runs per configuration)
	@test -x "$(KUBE_BIN)/kubemark" -a -x "$(KUBE_BIN)/kube-controller-manager" || { echo "KUBE_BIN=$(KUBE_BIN): no kubemark or kube-controller-manager (docs/operations.md)"; exit 2; }
	$(CLUSTER_ENV) $(PY) hack/cluster_check.py --bursts $(BURST_RUNS) --json bench/results/cluster-bursts-$(REAL_VERSION).json
