"""Extended resources backed by a DeviceClass (`placer.engine.extended_resources`): kube v1.36's
`Test_createRequestsAndMappings_requests` / `_mappings` rows (extendeddynamicresources_test.go,
names kept), the class resolver (`ExtendedResourceCache`) and the special claim's name."""

from __future__ import annotations

from typing import Any

import pytest
from placer.engine.devices import DeviceClassInfo
from placer.engine.extended_resources import (
    backed_requests,
    claim_name,
    class_for,
    is_dra_extended_resource_name,
    requests_and_mappings,
)
from placer.engine.parsing import parse_pod
from placer.testing import cluster_of, container, node, pod
from placer.testing_devices import device_class

GPU = "example.com/gpu"
GPU1, GPU_INIT = GPU + "1", GPU + "init"
IMPLICIT_INIT = "deviceclass.resource.kubernetes.io/classInit"


class Pod:
    """kube's `st.MakePod()` with `Res` (containers `con<i>`), `InitReq` (`init-con<i>`) and
    `SidecarReq` (`sidecar-con<i>`)."""

    def __init__(self) -> None:
        self.containers: list[dict[str, Any]] = []
        self.init: list[dict[str, Any]] = []

    def res(self, requests: dict[str, str]) -> Pod:
        self.containers.append(container(f"con{len(self.containers)}", requests=requests))
        return self

    def init_req(self, requests: dict[str, str]) -> Pod:
        self.init.append(container(f"init-con{len(self.init)}", requests=requests))
        return self

    def sidecar_req(self, requests: dict[str, str]) -> Pod:
        self.init.append(container(f"sidecar-con{len(self.init)}", requests=requests, restart_policy="Always"))
        return self

    def obj(self) -> Any:
        return parse_pod(pod("my-pod", containers=self.containers, init_containers=self.init, uid="1234"))


POD1 = Pod().res({GPU: "1", GPU1: "2"})
POD1_INIT_IMPLICIT = Pod().init_req({GPU_INIT: "1", IMPLICIT_INIT: "2"})
POD2 = Pod().res({GPU: "1"}).res({GPU1: "2"})
POD_INIT = Pod().res({GPU: "1"}).init_req({GPU_INIT: "2"})
POD_INIT2 = Pod().res({GPU: "1"}).init_req({GPU_INIT: "1"}).init_req({GPU_INIT: "2"})
POD_INIT_IMPLICIT = Pod().res({GPU: "1"}).init_req({GPU_INIT: "1"}).init_req({IMPLICIT_INIT: "2"})
POD_INIT3 = Pod().res({GPU: "1"}).init_req({GPU_INIT: "1"}).sidecar_req({GPU_INIT: "1"}).init_req({GPU_INIT: "2"})

RES = {GPU: 1}
RES2 = {GPU: 1, GPU1: 2}
RES_INIT = {GPU: 1, GPU_INIT: 2}
RES_INIT_IMPLICIT = {GPU: 1, GPU_INIT: 2, IMPLICIT_INIT: 2}
DEV_MAP = {GPU: "class"}
DEV_MAP2 = {GPU: "class", GPU1: "class1"}
DEV_MAP_INIT = {GPU: "class", GPU_INIT: "classInit", IMPLICIT_INIT: "classInit"}


def resolver(mapping: dict[str, str]) -> Any:
    return lambda name: DeviceClassInfo(mapping[name]) if name in mapping else None


@pytest.mark.parametrize(("pod_", "resources", "classes", "want"), [
    (POD1, {}, {}, []),
    (POD1, RES, DEV_MAP, [("container-0-request-0", "class", 1)]),
    (POD1, RES2, DEV_MAP, [("container-0-request-0", "class", 1)]),
    (POD1, RES2, DEV_MAP2, [("container-0-request-0", "class", 1), ("container-0-request-1", "class1", 2)]),
    (POD2, RES2, DEV_MAP2, [("container-0-request-0", "class", 1), ("container-1-request-0", "class1", 2)]),
    (POD_INIT, RES_INIT, DEV_MAP_INIT,
     [("container-0-request-0", "classInit", 2), ("container-1-request-0", "class", 1)]),
    (POD_INIT2, RES_INIT, DEV_MAP_INIT,
     [("container-1-request-0", "classInit", 2), ("container-2-request-0", "class", 1)]),
    (POD_INIT3, RES_INIT, DEV_MAP_INIT,
     [("container-1-request-0", "classInit", 1), ("container-2-request-0", "classInit", 2),
      ("container-3-request-0", "class", 1)]),
], ids=["nil", "one resource match", "one resource match, one resource not match", "two resources match",
        "two containers match", "one init container, one regular container",
        "two init containers, one regular container", "three init containers, one sidecar, one regular container"])
def test_create_requests_and_mappings_requests(pod_: Pod, resources: dict[str, int], classes: dict[str, str],
                                               want: list[tuple[str, str, int]]) -> None:
    requests, _ = requests_and_mappings(pod_.obj(), resources, resolver(classes))
    got = []
    for r in requests:
        assert r.exactly is not None and r.exactly.mode == "ExactCount"
        got.append((r.name, r.exactly.device_class, r.exactly.count))
    assert got == want


def _m(container_name: str, resource: str, request: str) -> tuple[str, str, str]:
    return (request, container_name, resource)


@pytest.mark.parametrize(("pod_", "resources", "classes", "want"), [
    (POD1, RES2, DEV_MAP2, [_m("con0", GPU, "container-0-request-0"), _m("con0", GPU1, "container-0-request-1")]),
    (POD1_INIT_IMPLICIT, RES_INIT_IMPLICIT, DEV_MAP_INIT,
     [_m("init-con0", IMPLICIT_INIT, "container-0-request-0"), _m("init-con0", GPU_INIT, "container-0-request-1")]),
    (POD2, RES2, DEV_MAP2, [_m("con0", GPU, "container-0-request-0"), _m("con1", GPU1, "container-1-request-0")]),
    (POD_INIT, RES_INIT, DEV_MAP_INIT,
     [_m("init-con0", GPU_INIT, "container-0-request-0"), _m("con0", GPU, "container-1-request-0")]),
    (POD_INIT2, RES_INIT, DEV_MAP_INIT,
     [_m("init-con0", GPU_INIT, "container-1-request-0"), _m("init-con1", GPU_INIT, "container-1-request-0"),
      _m("con0", GPU, "container-2-request-0")]),
    (POD_INIT_IMPLICIT, RES_INIT_IMPLICIT, DEV_MAP_INIT,
     [_m("init-con0", GPU_INIT, "container-0-request-0"), _m("init-con1", IMPLICIT_INIT, "container-1-request-0"),
      _m("con0", GPU, "container-2-request-0")]),
    (POD_INIT3, RES_INIT, DEV_MAP_INIT,
     [_m("init-con0", GPU_INIT, "container-1-request-0"), _m("sidecar-con1", GPU_INIT, "container-1-request-0"),
      _m("init-con2", GPU_INIT, "container-2-request-0"), _m("con0", GPU, "container-3-request-0")]),
], ids=["one container, two requests", "one container, one explicit and one implicit request",
        "two containers, two requests", "one init container, one regular container, one request",
        "three containers (two are init container), two requests",
        "three containers (two are init container), both explicit and implicit resources",
        "four containers (two are init container, one sidecar), three requests"])
def test_create_requests_and_mappings_mappings(pod_: Pod, resources: dict[str, int], classes: dict[str, str],
                                               want: list[tuple[str, str, str]]) -> None:
    _, mappings = requests_and_mappings(pod_.obj(), resources, resolver(classes))
    got = sorted((m["requestName"], m["containerName"], m["resourceName"]) for m in mappings)
    assert got == want


def test_resolver_explicit_and_implicit_names() -> None:
    """Every class under `deviceclass.resource.kubernetes.io/<name>`; an `extendedResourceName` named
    by two classes goes to the newer one, the lower name on a tie (kube's ExtendedResourceCache)."""
    older = device_class("old", extended=GPU)
    older["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    newer = device_class("new", extended=GPU)
    newer["metadata"]["creationTimestamp"] = "2026-02-01T00:00:00Z"
    state = cluster_of([node("n1")], objects=[older, newer, device_class("plain")])
    found = class_for(state.catalog, GPU)
    assert found is not None and found.name == "new"
    implicit = class_for(state.catalog, "deviceclass.resource.kubernetes.io/plain")
    assert implicit is not None and implicit.name == "plain"
    assert class_for(state.catalog, "example.com/other") is None
    tie = cluster_of([node("n1")], objects=[device_class("b", extended=GPU), device_class("a", extended=GPU)])
    tied = class_for(tie.catalog, GPU)
    assert tied is not None and tied.name == "a"


def test_backed_requests_and_names() -> None:
    state = cluster_of([node("n1")], objects=[device_class("gpu-class", extended=GPU)])
    asking = parse_pod(pod("p", requests={GPU: "2", "example.com/fpga": "1"}, uid="u1"))
    assert backed_requests(asking, state.catalog) == {GPU: 2}
    assert backed_requests(parse_pod(pod("plain", cpu="1")), state.catalog) == {}
    assert is_dra_extended_resource_name(GPU) and is_dra_extended_resource_name(IMPLICIT_INIT)
    assert not is_dra_extended_resource_name("cpu") and not is_dra_extended_resource_name("kubernetes.io/x")
    assert not is_dra_extended_resource_name("hugepages-2Mi")
    name = claim_name(asking)
    assert name.startswith("p-extended-resources-") and len(name) == len("p-extended-resources-") + 5
    assert claim_name(asking) == name  # the same for the same pod: a retried create finds its claim
    long = parse_pod(pod("x" * 60, requests={GPU: "1"}, uid="u2"))
    assert len(claim_name(long)) == 63
