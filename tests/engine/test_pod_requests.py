"""A pod's requests as kube-scheduler v1.36 counts them, row by row from kube's own tables:
component-helpers/resource helpers_test.go (PodRequests: sidecars, overhead, pod-level resources,
in-place resize) and pkg/scheduler/framework types_test.go (PodInfo.CalculateResource: what a pod
holds on its node, with the non-zero defaults). Placer computes them once, in `parse_pod`:
`fit_requests` is PodRequests from the spec alone (the pod being placed, kube's PreFilter),
`requests` with UseStatusResources (a pod on a node), `nonzero_cpu` / `nonzero_memory` kube's
Non0CPU / Non0Mem.

Rows that set options v1.36's scheduler never uses (SkipPodLevelResources, the alpha
DRANodeAllocatableResources gate) are left out; ExcludeOverhead rows are checked with the overhead
added back (the scheduler always counts it)."""

from __future__ import annotations

import importlib.util
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml
from placer.engine.objects import PodInfo
from placer.engine.parsing import is_supported_pod_level_resource, parse_pod
from placer.simulate import simulate
from placer.testing import cluster_of, node

Obj = dict[str, Any]
KI, MI, GI = 1024, 1024**2, 1024**3
M, G = 10**6, 10**9


def ctr(name: str = "", requests: Obj | None = None, limits: Obj | None = None, sidecar: bool = False) -> Obj:
    resources: Obj = {}
    if requests is not None:
        resources["requests"] = dict(requests)
    if limits is not None:
        resources["limits"] = dict(limits)
    result: Obj = {"name": name, "image": "busybox", "resources": resources}
    if sidecar:
        result["restartPolicy"] = "Always"
    return result


def status(name: str, running: Obj | None = None, allocated: Obj | None = None) -> Obj:
    """A container status; `running` is status.resources.requests (None: no `resources` at all)."""
    result: Obj = {"name": name}
    if running is not None:
        result["resources"] = {"requests": dict(running)}
    if allocated is not None:
        result["allocatedResources"] = dict(allocated)
    return result


INFEASIBLE = [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]
DEFERRED = [{"type": "PodResizePending", "status": "True", "reason": "Deferred"}]
IN_PROGRESS = [{"type": "PodResizeInProgress", "status": "True"}]


RAW: list[Obj] = []  # every pod the tables below build, as written (for the audit's cross-check)


def kpod(*args: Any, **kwargs: Any) -> PodInfo:
    raw = kraw(*args, **kwargs)
    RAW.append(raw)
    info = parse_pod(raw)
    assert info.error is None, info.error
    return info


def kraw(containers: list[Obj] | None = None, inits: list[Obj] | None = None, *, overhead: Obj | None = None,
         pod_level: Obj | None = None, statuses: list[Obj] | None = None, init_statuses: list[Obj] | None = None,
         conditions: list[Obj] | None = None, pod_status: Obj | None = None) -> Obj:
    spec: Obj = {"containers": list(containers or [])}
    if inits:
        spec["initContainers"] = list(inits)
    if overhead is not None:
        spec["overhead"] = dict(overhead)
    if pod_level is not None:
        spec["resources"] = dict(pod_level)
    pod_status_obj: Obj = {"phase": "Running"}
    if statuses is not None:
        pod_status_obj["containerStatuses"] = statuses
    if init_statuses is not None:
        pod_status_obj["initContainerStatuses"] = init_statuses
    if conditions is not None:
        pod_status_obj["conditions"] = conditions
    if pod_status is not None:
        pod_status_obj.update(pod_status)
    return {"metadata": {"name": "p", "namespace": "default"}, "spec": spec, "status": pod_status_obj}


# ------------------------------------------------------------- helpers_test.go TestPodRequestsAndLimits

def test_pod_requests_and_limits_rows() -> None:
    # "just-limit-no-overhead": kube's PodRequests gives {}; the API server defaults a container's
    # missing request to its limit before any scheduler sees the pod, and Placer does the same
    assert kpod([ctr(limits={"cpu": "9"})]).fit_requests == {"cpu": 9000}
    # "just-overhead"
    assert kpod([ctr()], overhead={"cpu": "5", "memory": "5"}).fit_requests == {"cpu": 5000, "memory": 5}
    # "req-and-overhead", "all-req-lim-and-overhead", "req-some-lim-and-overhead"
    for limits in (None, {"cpu": "2", "memory": "12"}, {"cpu": "2"}):
        info = kpod([ctr(requests={"cpu": "1", "memory": "10"}, limits=limits)], overhead={"cpu": "5", "memory": "5"})
        assert info.fit_requests == {"cpu": 6000, "memory": 15}


# ------------------------------------------------ helpers_test.go TestPodRequestsAndLimitsWithoutOverhead

TWO = [ctr("foobar", {"cpu": "1", "memory": "5"}, {"cpu": "2", "memory": "10"}),
       ctr("foobar2", {"cpu": "4", "memory": "12"}, {"cpu": "8", "memory": "24"})]


@pytest.mark.parametrize(
    ("name", "inits", "overhead", "expected"),
    [
        ("two container no overhead - should just be sum of containers", [], None, {"cpu": 5000, "memory": 17}),
        ("two container with overhead - shouldn't consider overhead", [], {"cpu": "3", "memory": "8"},
         {"cpu": 5000, "memory": 17}),
        ("two container with overhead, massive init - should just be the largest init",
         [ctr("small-init", {"cpu": "1", "memory": "5"}, {"cpu": "1", "memory": "5"}),
          ctr("big-init", {"cpu": "40", "memory": "120"}, {"cpu": "80", "memory": "240"})],
         {"cpu": "3", "memory": "8"}, {"cpu": 40000, "memory": 120}),
    ],
)
def test_pod_requests_without_overhead_rows(name: str, inits: list[Obj], overhead: Obj | None,
                                            expected: dict[str, int]) -> None:
    info = kpod(TWO, inits, overhead=overhead)
    added = {"cpu": 3000, "memory": 8} if overhead else {"cpu": 0, "memory": 0}
    assert info.fit_requests == {k: v + added[k] for k, v in expected.items()}


# ------------------------------------------------------------ helpers_test.go TestPodResourceRequests

RESTARTABLE_INIT = [ctr("restartable-init-1", {"cpu": "4"}, sidecar=True)]
RESTARTABLE_STATUS = [status("restartable-init-1", {"cpu": "2"})]

POD_RESOURCE_REQUESTS = [
    # (name, use status?, pod, expected)
    ("nil options, larger init container", False,
     kpod([ctr(requests={"cpu": "1"})], [ctr(requests={"cpu": "4"})]), {"cpu": 4000}),
    ("nil options, larger containers", False,
     kpod([ctr(requests={"cpu": "2"}), ctr(requests={"cpu": "3"})], [ctr(requests={"cpu": "2"})]), {"cpu": 5000}),
    ("pod overhead excluded (added back)", False,
     kpod([ctr(requests={"cpu": "2"}), ctr(requests={"cpu": "3"})], [ctr(requests={"cpu": "2"})],
          overhead={"cpu": "1"}), {"cpu": 5000 + 1000}),
    ("pod overhead included", False,
     kpod([ctr(requests={"cpu": "2"}), ctr(requests={"cpu": "3"})], [ctr(requests={"cpu": "2"}, limits={"cpu": "2"})],
          overhead={"cpu": "1", "memory": "1Gi"}), {"cpu": 6000, "memory": GI}),
    ("resized, infeasible", True,
     kpod([ctr("container-1", {"cpu": "4"})], statuses=[status("container-1", {"cpu": "2"})], conditions=INFEASIBLE),
     {"cpu": 2000}),
    ("resized, infeasible & in-progress", True,
     kpod([ctr("container-1", {"cpu": "6"})], statuses=[status("container-1", {"cpu": "2"}, {"cpu": "4"})],
          conditions=INFEASIBLE), {"cpu": 4000}),
    ("resized, no resize status", True,
     kpod([ctr("container-1", {"cpu": "4"})], statuses=[status("container-1", {"cpu": "2"})]), {"cpu": 4000}),
    ("resized: per-resource 3-way maximum", True,
     kpod([ctr("container-1", {"cpu": "30m", "memory": "20M", "ephemeral-storage": "10G"})],
          statuses=[status("container-1", {"cpu": "10m", "memory": "30M", "ephemeral-storage": "20G"},
                           {"cpu": "20m", "memory": "10M", "ephemeral-storage": "30G"})]),
     {"cpu": 30, "memory": 30 * M, "ephemeral-storage": 30 * G}),
    ("resized, infeasible, but don't use status", False,
     kpod([ctr("container-1", {"cpu": "4"})], statuses=[status("container-1", {"cpu": "2"})], conditions=INFEASIBLE),
     {"cpu": 4000}),
    ("resized, restartable init container, infeasible", True,
     kpod([], RESTARTABLE_INIT, init_statuses=RESTARTABLE_STATUS, conditions=INFEASIBLE), {"cpu": 2000}),
    ("resized, restartable init container, no resize status", True,
     kpod([], RESTARTABLE_INIT, init_statuses=RESTARTABLE_STATUS), {"cpu": 4000}),
    ("resized, restartable init container, infeasible, but don't use status", False,
     kpod([], RESTARTABLE_INIT, init_statuses=RESTARTABLE_STATUS, conditions=INFEASIBLE), {"cpu": 4000}),
    ("restartable init container", False,
     kpod([ctr("container-1", {"cpu": "1"})], [ctr("restartable-init-1", {"cpu": "1"}, sidecar=True)]),
     {"cpu": 2000}),
    ("multiple restartable init containers", False,
     kpod([ctr("container-1", {"cpu": "1"})],
          [ctr("init-1", {"cpu": "5"}), ctr("restartable-init-1", {"cpu": "1"}, sidecar=True),
           ctr("restartable-init-2", {"cpu": "2"}, sidecar=True),
           ctr("restartable-init-3", {"cpu": "3"}, sidecar=True)]),
     {"cpu": 7000}),
    ("multiple restartable and regular init containers", False,
     kpod([ctr("container-1", {"cpu": "1"})],
          [ctr("init-1", {"cpu": "5"}), ctr("restartable-init-1", {"cpu": "1"}, sidecar=True),
           ctr("restartable-init-2", {"cpu": "2"}, sidecar=True), ctr("init-2", {"cpu": "5"}),
           ctr("restartable-init-3", {"cpu": "3"}, sidecar=True)]),
     {"cpu": 8000}),
    ("restartable-init, init and regular", False,
     kpod([ctr("container-1", {"cpu": "100"})],
          [ctr("restartable-init-1", {"cpu": "10"}, sidecar=True), ctr("init-1", {"cpu": "200"})]),
     {"cpu": 210000}),
]


@pytest.mark.parametrize(("name", "use_status", "info", "expected"), POD_RESOURCE_REQUESTS,
                         ids=[row[0] for row in POD_RESOURCE_REQUESTS])
def test_pod_resource_requests_rows(name: str, use_status: bool, info: PodInfo, expected: dict[str, int]) -> None:
    assert (info.requests if use_status else info.fit_requests) == expected


def test_a_regular_init_containers_status_is_not_read() -> None:
    # kube reads the status of containers and sidecars only: a finished init container's is history
    info = kpod([ctr("app", {"cpu": "1"})], [ctr("init", {"cpu": "2"})], init_statuses=[status("init", {"cpu": "8"})])
    assert info.requests == {"cpu": 2000}


def test_allocated_resources_without_a_resources_status_are_not_read() -> None:
    # determineEffectiveRequests runs only for a status that reports `resources`
    info = kpod([ctr("c", {"cpu": "1"})], statuses=[status("c", None, {"cpu": "3"})])
    assert info.requests == {"cpu": 1000}
    info = kpod([ctr("c", {"cpu": "1"})], statuses=[status("c", {}, {"cpu": "3"})])
    assert info.requests == {"cpu": 3000}


# ------------------------------------------------------- helpers_test.go TestPodLevelResourceRequests

POD_LEVEL_REQUESTS = [
    ("nil", kpod(), {}),
    ("pod level memory resource with SkipPodLevelResources false", kpod(pod_level={"requests": {"memory": "2Mi"}}),
     {"memory": 2 * MI}),
    ("pod level memory and container level cpu resources with SkipPodLevelResources false",
     kpod([ctr(requests={"cpu": "2m"})], pod_level={"requests": {"memory": "2Mi"}}), {"memory": 2 * MI, "cpu": 2}),
    # `storage` is no resource the scheduler counts (kube's framework.Resource drops it): only that
    # the pod-level value is not taken shows here
    ("pod level unsupported resources set at both pod-level and container-level with SkipPodLevelResources false",
     kpod([ctr(requests={"storage": "3Mi"})], pod_level={"requests": {"storage": "2Mi"}}), {}),
    ("pod level unsupported resources set at pod-level with SkipPodLevelResources false",
     kpod([ctr(requests={"memory": "3Mi"})], pod_level={"requests": {"storage": "2Mi"}}), {"memory": 3 * MI}),
    ("only container level resources set with SkipPodLevelResources false",
     kpod([ctr(requests={"memory": "3Mi", "cpu": "2m"})]), {"memory": 3 * MI, "cpu": 2}),
    ("both container-level and pod-level resources set with SkipPodLevelResources false",
     kpod([ctr(requests={"memory": "3Mi", "cpu": "2m"})], pod_level={"requests": {"memory": "6Mi", "cpu": "8m"}}),
     {"memory": 6 * MI, "cpu": 8}),
    ("container-level resources and init container set with SkipPodLevelResources false",
     kpod([ctr(requests={"memory": "3Mi", "cpu": "2m"})], [ctr(requests={"memory": "5Mi", "cpu": "4m"})]),
     {"memory": 5 * MI, "cpu": 4}),
    ("container-level resources and sidecar container set with SkipPodLevelResources false",
     kpod([ctr(requests={"memory": "3Mi", "cpu": "2m"})], [ctr(requests={"memory": "5Mi", "cpu": "4m"}, sidecar=True)]),
     {"memory": 8 * MI, "cpu": 6}),
    ("container-level resources, init and sidecar container set with SkipPodLevelResources false",
     kpod([ctr(requests={"memory": "3Mi", "cpu": "2m"})],
          [ctr(requests={"memory": "5Mi", "cpu": "4m"}, sidecar=True), ctr(requests={"memory": "6Mi", "cpu": "8m"})]),
     {"memory": 11 * MI, "cpu": 12}),
    ("pod-level resources, container-level resources, init and sidecar container set with SkipPodLevelResources false",
     kpod([ctr(requests={"memory": "3Mi", "cpu": "2m"})],
          [ctr(requests={"memory": "5Mi", "cpu": "4m"}, sidecar=True), ctr(requests={"memory": "6Mi", "cpu": "8m"})],
          pod_level={"requests": {"memory": "15Mi", "cpu": "18m"}}),
     {"memory": 15 * MI, "cpu": 18}),
    ("pod-level resources, hugepage request/limit single page size",
     kpod(pod_level={"limits": {"hugepages-2Mi": "2Mi"}, "requests": {"memory": "10Mi", "hugepages-2Mi": "2Mi"}}),
     {"memory": 10 * MI, "hugepages-2Mi": 2 * MI}),
    ("pod-level resources, hugepage request/limit multiple page sizes",
     kpod(pod_level={"limits": {"hugepages-2Mi": "2Mi", "hugepages-1Gi": "1Gi"},
                     "requests": {"cpu": "1", "hugepages-2Mi": "2Mi", "hugepages-1Gi": "1Gi"}}),
     {"cpu": 1000, "hugepages-2Mi": 2 * MI, "hugepages-1Gi": GI}),
    ("pod-level resources, container-level resources, hugepage request/limit single page size",
     kpod([ctr(requests={"hugepages-2Mi": "6Mi"}, limits={"hugepages-2Mi": "6Mi"})],
          pod_level={"limits": {"hugepages-2Mi": "10Mi"}, "requests": {"cpu": "1", "hugepages-2Mi": "10Mi"}}),
     {"cpu": 1000, "hugepages-2Mi": 10 * MI}),
    ("pod-level resources, container-level resources, hugepage request/limit multiple page sizes",
     kpod([ctr(requests={"cpu": "1", "hugepages-1Gi": "2Gi"}, limits={"hugepages-1Gi": "2Gi"})],
          pod_level={"limits": {"hugepages-2Mi": "10Mi", "hugepages-1Gi": "2Gi"},
                     "requests": {"cpu": "1", "hugepages-2Mi": "10Mi", "hugepages-1Gi": "2Gi"}}),
     {"cpu": 1000, "hugepages-2Mi": 10 * MI, "hugepages-1Gi": 2 * GI}),
    ("pod-level resources, container-level resources, hugepage request/limit multiple page sizes between pod-level "
     "and container-level",
     kpod([ctr(requests={"memory": "4Mi", "hugepages-1Gi": "1Gi"}, limits={"hugepages-1Gi": "1Gi"})],
          pod_level={"limits": {"hugepages-2Mi": "10Mi"}, "requests": {"cpu": "1", "hugepages-2Mi": "10Mi"}}),
     {"cpu": 1000, "memory": 4 * MI, "hugepages-2Mi": 10 * MI, "hugepages-1Gi": GI}),
]


@pytest.mark.parametrize(("name", "info", "expected"), POD_LEVEL_REQUESTS, ids=[row[0] for row in POD_LEVEL_REQUESTS])
def test_pod_level_resource_requests_rows(name: str, info: PodInfo, expected: dict[str, int]) -> None:
    assert info.fit_requests == expected
    assert info.requests == expected


@pytest.mark.parametrize(("resource", "supported"), [("cpu", True), ("memory", True), ("ephemeral-storage", False),
                                                     ("hugepages-2Mi", True), ("hugepages-1Gi", True)])
def test_is_supported_pod_level_resource_rows(resource: str, supported: bool) -> None:
    assert is_supported_pod_level_resource(resource) is supported


@pytest.mark.parametrize(
    ("name", "pod_level", "pod_level_counted"),
    [
        # helpers_test.go TestIsPodLevelResourcesSet, as what the scheduler then counts
        ("nil resources struct", None, False),
        ("empty resources struct", {}, False),
        ("only unsupported resource requests set", {"requests": {"ephemeral-storage": "1Mi"}}, False),
        ("only unsupported resource limits set", {"limits": {"ephemeral-storage": "1Mi"}}, False),
        ("unsupported and suported resources requests set",
         {"requests": {"ephemeral-storage": "1Mi", "cpu": "1m"}}, True),
        ("unsupported and suported resources limits set", {"limits": {"ephemeral-storage": "1Mi", "cpu": "1m"}}, True),
    ],
)
def test_is_pod_level_resources_set_rows(name: str, pod_level: Obj | None, pod_level_counted: bool) -> None:
    info = kpod([ctr(requests={"memory": "1Gi"})], pod_level=pod_level)
    # with pod-level cpu (1m, or defaulted from the 1m limit) the pod asks 1m; else no cpu at all,
    # and for scoring on a node the 100m default
    assert info.fit_requests.get("cpu") == (1 if pod_level_counted else None)
    assert info.nonzero_cpu == (1 if pod_level_counted else 100)


def test_pod_level_limits_default_requests_as_the_api_server_does() -> None:
    # defaultPodRequests: the containers' total where they request it (cpu, memory), else the limit
    info = kpod([ctr(requests={"cpu": "500m"})], pod_level={"limits": {"cpu": "2", "memory": "1Gi"}})
    assert info.fit_requests == {"cpu": 500, "memory": GI}
    # defaultHugePagePodLimits, then the request from that limit
    info = kpod([ctr(requests={"hugepages-2Mi": "4Mi"}, limits={"hugepages-2Mi": "4Mi"})],
                pod_level={"requests": {"cpu": "1"}})
    assert info.fit_requests == {"cpu": 1000, "hugepages-2Mi": 4 * MI}
    # requests already set are left alone
    info = kpod([ctr(requests={"cpu": "500m"})], pod_level={"requests": {"cpu": "1"}, "limits": {"cpu": "2"}})
    assert info.fit_requests == {"cpu": 1000}


# ------------------------------------------------------ types_test.go TestPodInfoCalculateResources

CALCULATE_RESOURCES = [
    # (name, pod, (MilliCPU, Memory, EphemeralStorage), Non0CPU, Non0Mem)
    ("requestless container", kpod([ctr()]), {}, 100, 200 * MI),
    ("1X container with requests", kpod([ctr(requests={"cpu": "500m", "memory": "500M"})]),
     {"cpu": 500, "memory": 500 * M}, 500, 500 * M),
    ("2X container with requests",
     kpod([ctr(requests={"cpu": "500m", "memory": "500M"}), ctr(requests={"cpu": "700m", "memory": "800M"})]),
     {"cpu": 1200, "memory": 1300 * M}, 1200, 1300 * M),
    ("1X container and 1X init container with pod-level requests",
     kpod([ctr(requests={"cpu": "500m", "memory": "500M"})], [ctr(requests={"cpu": "500m", "memory": "500M"})],
          pod_level={"requests": {"cpu": "1200m", "memory": "1200M"}}),
     {"cpu": 1200, "memory": 1200 * M}, 1200, 1200 * M),
    ("1X container and 1X sidecar container with pod-level requests",
     kpod([ctr(requests={"cpu": "500m", "memory": "500M"})],
          [ctr(requests={"cpu": "500m", "memory": "500M"}, sidecar=True)],
          pod_level={"requests": {"cpu": "1200m", "memory": "1200M"}}),
     {"cpu": 1200, "memory": 1200 * M}, 1200, 1200 * M),
    ("1X container with pod-level memory requests", kpod([ctr()], [ctr()], pod_level={"requests": {"memory": "1200M"}}),
     {"memory": 1200 * M}, 100, 1200 * M),
    ("1X container with pod-level cpu requests", kpod([ctr()], [ctr()], pod_level={"requests": {"cpu": "500m"}}),
     {"cpu": 500}, 500, 200 * MI),
    ("1X container unsupported resources and pod-level supported resources",
     kpod([ctr(requests={"ephemeral-storage": "800M"})], [ctr(requests={"ephemeral-storage": "500M"})],
          pod_level={"requests": {"cpu": "500m"}}),
     {"cpu": 500, "ephemeral-storage": 800 * M}, 500, 200 * MI),
    ("DRA gate disabled, with node allocatable resource claim",
     kpod([ctr(requests={"cpu": "500m", "memory": "500M"})],
          pod_status={"nodeAllocatableResourceClaimStatuses": [
              {"resourceClaimName": "node-allocatable-claim", "resources": {"cpu": "100m", "memory": "200M"}}]}),
     {"cpu": 500, "memory": 500 * M}, 500, 500 * M),
]


@pytest.mark.parametrize(("name", "info", "resource", "non0_cpu", "non0_mem"), CALCULATE_RESOURCES,
                         ids=[row[0] for row in CALCULATE_RESOURCES])
def test_pod_info_calculate_resources_rows(name: str, info: PodInfo, resource: dict[str, int], non0_cpu: int,
                                           non0_mem: int) -> None:
    assert {k: v for k, v in info.requests.items() if v} == resource
    assert (info.nonzero_cpu, info.nonzero_memory) == (non0_cpu, non0_mem)


# ---------------------------------------------------- types_test.go TestCalculatePodResourcesWithResize

C500 = {"cpu": "500m", "memory": "500M"}
C700 = {"cpu": "700m", "memory": "800M"}


def resize_pod(requests: Obj, status_resources: Obj, *, pod_level: Obj | None = None,
               pod_level_status: Obj | None = None, init: Obj | None = None, init_status: Obj | None = None,
               sidecar: Obj | None = None, sidecar_status: Obj | None = None,
               conditions: list[Obj] | None = None) -> PodInfo:
    """preparePodInfo: c1, then init i1 and sidecar s1, each with a status reporting `resources`."""
    inits, init_statuses = [], []
    if init is not None:
        inits.append(ctr("i1", init))
    if init_status is not None:
        init_statuses.append(status("i1", init_status))
    if sidecar is not None:
        inits.append(ctr("s1", sidecar, sidecar=True))
    if sidecar_status is not None:
        init_statuses.append(status("s1", sidecar_status))
    return kpod([ctr("c1", requests)], inits, statuses=[status("c1", status_resources)],
                init_statuses=init_statuses or None, conditions=conditions,
                pod_level=None if pod_level is None else {"requests": pod_level},
                pod_status=None if pod_level_status is None else {"resources": {"requests": pod_level_status}})


RESIZE_ROWS = [
    ("Pod with no pending resize", resize_pod(C500, C500), 500, 500 * M),
    ("Pod with pod-level resources no pending resize",
     resize_pod(C500, {"cpu": "700m", "memory": "500M"}, pod_level={"cpu": "700m", "memory": "500M"},
                pod_level_status=C500), 700, 500 * M),
    ("Pod with resize in progress", resize_pod(C500, C500, conditions=IN_PROGRESS), 500, 500 * M),
    ("Pod with pod-level resources and resize in progress",
     resize_pod(C500, {"cpu": "700m", "memory": "500M"}, pod_level={"cpu": "700m", "memory": "500M"},
                pod_level_status=C500, conditions=IN_PROGRESS), 700, 500 * M),
    ("Pod with deferred resize", resize_pod(C700, C500, conditions=DEFERRED), 700, 800 * M),
    ("Pod with pod-level resources and with deferred resize",
     resize_pod(C500, C500, pod_level=C700, pod_level_status=C500, conditions=DEFERRED), 700, 800 * M),
    ("Pod with infeasible resize", resize_pod(C700, C500, conditions=INFEASIBLE), 500, 500 * M),
    ("Pod with init container and no pending resize", resize_pod(C500, C500, init=C700, init_status=C700),
     700, 800 * M),
    ("Pod with sider container and no pending resize",
     resize_pod(C500, C500, init=C700, init_status=C700, sidecar=C700, sidecar_status=C700), 1200, 1300 * M),
]


@pytest.mark.parametrize(("name", "info", "cpu", "memory"), RESIZE_ROWS, ids=[row[0] for row in RESIZE_ROWS])
def test_calculate_pod_resources_with_resize_rows(name: str, info: PodInfo, cpu: int, memory: int) -> None:
    assert info.requests == {"cpu": cpu, "memory": memory}
    assert (info.nonzero_cpu, info.nonzero_memory) == (cpu, memory)


def test_pod_level_infeasible_resize_counts_what_runs() -> None:
    # InPlacePodLevelResourcesVerticalScaling (beta, on in v1.36): status.resources and
    # status.allocatedResources of the pod level, as for a container
    info = kpod([ctr("c", {"cpu": "100m"})], pod_level={"requests": {"cpu": "4"}},
                pod_status={"resources": {"requests": {"cpu": "1"}}, "allocatedResources": {"cpu": "2"}},
                conditions=INFEASIBLE)
    assert (info.requests, info.fit_requests) == ({"cpu": 2000}, {"cpu": 4000})
    info = kpod([ctr("c", {"cpu": "100m"})], pod_level={"requests": {"cpu": "4"}},
                pod_status={"resources": {"requests": {"cpu": "1"}}, "allocatedResources": {"cpu": "2"}})
    assert info.requests == {"cpu": 4000}
    assert info.spec_requests is None  # the same from the spec: kept once


def test_the_node_accounts_the_status_aware_requests() -> None:
    bound = {"metadata": {"name": "b", "namespace": "default"},
             "spec": {"nodeName": "n", "containers": [ctr("c", {"cpu": "1"})]},
             "status": {"phase": "Running", "containerStatuses": [status("c", {"cpu": "3"}, {"cpu": "3"})]}}
    cluster = cluster_of([node("n", cpu="4")], [bound])
    assert cluster.requested[cluster.index["n"], 0] == 3000
    cluster.remove_pod("default/b")
    assert cluster.requested[cluster.index["n"], 0] == 0


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda s: s.update(containerStatuses={"name": "c"}), "status.containerStatuses"),
        (lambda s: s.update(containerStatuses=[{"name": "c", "resources": {"requests": {"cpu": "x"}}}]),
         "status.containerStatuses[0].resources.requests.cpu"),
        (lambda s: s.update(containerStatuses=[{"name": "c", "resources": {}, "allocatedResources": {"cpu": -1}}]),
         "status.containerStatuses[0].allocatedResources.cpu"),
        (lambda s: s.update(initContainerStatuses=[{"name": "c", "resources": 3}]),
         "status.initContainerStatuses[0].resources"),
        (lambda s: s.update(containerStatuses=[None, 7]), "status.containerStatuses[1]"),
    ],
)
def test_a_malformed_resize_status_fails_the_pod_naming_the_field(mutate: Any, field: str) -> None:
    raw: Obj = {"metadata": {"name": "p"}, "spec": {"containers": [ctr("c", {"cpu": "1"})]}, "status": {}}
    mutate(raw["status"])
    info = parse_pod(raw)
    assert info.error is not None and info.error.startswith(f"invalid pod default/p: {field}: "), info.error


def test_a_malformed_pod_level_quantity_fails_the_pod_naming_the_field() -> None:
    raw: Obj = {"metadata": {"name": "p"}, "spec": {"containers": [ctr("c")], "resources": {"requests": {"cpu": "?"}}}}
    info = parse_pod(raw)
    assert info.error is not None and info.error.startswith("invalid pod default/p: spec.resources.requests.cpu: ")


def test_simulate_reads_pod_level_and_resize_fields_from_pod_yaml(tmp_path: Path) -> None:
    """`placer simulate` (and `placer explain`, on the same engine objects) read the v1.36 fields:
    the bound pod's resize holds 2 cpu of node a's 4; the pending pod's pod-level 3 cpu fit b only,
    and its sister asking 3 cpu at pod level finds no room left anywhere."""
    bound = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "resizing", "namespace": "default"},
             "spec": {"nodeName": "a", "containers": [ctr("c", {"cpu": "500m"})]},
             "status": {"phase": "Running", "containerStatuses": [status("c", {"cpu": "2"}, {"cpu": "2"})]}}
    pending = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                "spec": {"schedulerName": "placer", "containers": [ctr("c")],
                         "resources": {"requests": {"cpu": "3"}}}} for name in ("first", "second")]
    documents = [node("a", cpu="4"), node("b", cpu="3"), bound, *pending]
    profile = {"apiVersion": "placer.dev/v1alpha1", "kind": "SchedulerProfile", "metadata": {"name": "p"},
               "spec": {"schedulerName": "placer"}}
    cluster_file = tmp_path / "cluster.yaml"
    cluster_file.write_text(yaml.safe_dump_all(documents))
    profile_file = tmp_path / "profile.yaml"
    profile_file.write_text(yaml.safe_dump(profile))
    result = simulate([cluster_file], [profile_file])
    placed = {d.pod: (d.node, d.message) for d in result.decisions}
    assert placed["default/first"] == ("b", None)
    assert placed["default/second"][0] is None
    assert placed["default/second"][1].startswith("0/2 nodes are available: 2 Insufficient cpu.")



def test_the_benchmarks_audit_counts_what_the_engine_counts() -> None:
    """bench/audit.py is written apart from the engine: on every pod of the tables above (bound, so
    as a node holds them) both count the same."""
    path = Path(__file__).resolve().parents[2] / "bench" / "audit.py"
    spec = importlib.util.spec_from_file_location("bench_audit", path)
    assert spec is not None and spec.loader is not None
    audit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(audit)
    assert len(RAW) > 50
    for raw in RAW:
        engine = {k: v for k, v in parse_pod(raw).requests.items() if v}
        audited = audit.pod_requests(raw)
        assert audited.pop("pods") == 1
        assert {k: v for k, v in audited.items() if v} == {
            k: Fraction(v, 1000) if k == "cpu" else v for k, v in engine.items()}, raw
