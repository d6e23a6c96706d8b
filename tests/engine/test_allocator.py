"""The DRA allocator (`placer.engine.allocator`) against kube v1.36's own test rows
(`dynamic-resource-allocation/structured/internal/allocatortesting/allocator_testing.go`), row
names kept; the features the `stable` allocator supports (admin access, prioritized lists,
partitionable devices, device taints) are on, as in kube v1.36."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from placer.engine.allocator import AllocationError, Allocator, InvalidPools, gather_pools
from placer.engine.devices import parse_device_class, parse_resource_claim, parse_resource_slice
from placer.testing_devices import (
    device,
    device_class,
    first_available,
    request,
    resource_claim,
    resource_slice,
    sub_request,
)

NODE1, NODE2 = "node-1", "node-2"
LABELS = {NODE1: {"region": "region-1", "planet": "earth"}, NODE2: {"region": "region-2", "planet": "earth"}}
CLASS_A, CLASS_B = "class-a", "class-b"
DRIVER_A, DRIVER_B = "driver-a", "driver-b"
POOL1, POOL2, POOL3, POOL4 = "pool-1", "pool-2", "pool-3", "pool-4"
D0, D1, D2, D3 = "device-0", "device-1", "device-2", "device-3"

NO_SCHEDULE = {"key": "taint-key", "value": "taint-value", "effect": "NoSchedule"}
NO_EXECUTE = {"key": "taint-key", "value": "taint-value-2", "effect": "NoExecute"}
TAINT_NONE = {"key": "taint-key", "value": "taint-value", "effect": "None"}
TOLERATE_NO_SCHEDULE = {"operator": "Exists", "key": "taint-key", "effect": "NoSchedule"}
TOLERATE_NO_EXECUTE = {"operator": "Equal", "key": "taint-key", "value": "taint-value-2", "effect": "NoExecute"}


def cls(name: str, driver: str, **kwargs: Any) -> dict[str, Any]:
    return device_class(name, f'device.driver == "{driver}"', **kwargs)


def one_device(name: str, driver: str, pool: str, node: str | None = NODE1, **kwargs: Any) -> dict[str, Any]:
    return resource_slice(name, driver, node=node, pool=pool, devices=[device(D1)], **kwargs)


def many(name: str, driver: str, pool: str, count: int, node: str = NODE1) -> dict[str, Any]:
    return resource_slice(name, driver, node=node, pool=pool, devices=[device(f"device-{i}") for i in range(count)])


def claim(name: str, *requests: dict[str, Any], constraints: Sequence[dict[str, Any]] = (),
          config: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    return resource_claim(name, namespace="", requests=requests, constraints=constraints, config=config)


def memory(at_least: str) -> str:
    return f'device.capacity["{DRIVER_A}"].memory.compareTo(quantity("{at_least}")) >= 0'


def local(node: str) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
    return (("field", "metadata.name", (node,)),)


def allocate(
    claims: Sequence[dict[str, Any]],
    classes: Sequence[dict[str, Any]],
    slices: Sequence[dict[str, Any]],
    node: str = NODE1,
    allocated: Sequence[tuple[str, str, str]] = (),
) -> list[tuple[Any, list[tuple[Any, ...]], list[dict[str, Any]]]] | None:
    """Each claim's (node selector, sorted device results, config), or None when they do not fit."""
    by_name = {c["metadata"]["name"]: parse_device_class(c) for c in classes}
    parsed = [parse_resource_slice(s) for s in slices]
    pools = gather_pools(parsed, node, LABELS[node])
    allocator = Allocator(by_name.get, set(allocated))
    results = allocator.allocate(node, LABELS[node], pools, [parse_resource_claim(c) for c in claims])
    if results is None:
        return None
    out = []
    for result in results:
        selector = None
        if result.node_selector is not None:
            (term,) = result.node_selector
            selector = tuple(sorted(
                [("label", r.key, tuple(sorted(r.values))) for r in term.expressions]
                + [("field", r.key, tuple(sorted(r.values))) for r in term.fields]
            ))
        devices = sorted(
            (d.request, d.driver, d.pool, d.device, d.admin_access, tuple(t.as_json()["operator"] + t.key
                                                                           for t in d.tolerations))
            for d in result.devices
        )
        out.append((selector, devices, list(result.config)))
    return out


def dev(request_name: str, driver: str, pool: str, name: str, admin: bool | None = None,
        tolerations: tuple[str, ...] = ()) -> tuple[Any, ...]:
    return (request_name, driver, pool, name, admin, tolerations)


def one(selector: Any, *devices: tuple[Any, ...], config: Sequence[dict[str, Any]] = ()) -> tuple[Any, ...]:
    return (selector, sorted(devices), list(config))


def test_simple() -> None:
    assert allocate([claim("claim-0", request("req-0", CLASS_A))], [cls(CLASS_A, DRIVER_A)],
                    [one_device("slice-1", DRIVER_A, POOL1)]) == [one(local(NODE1), dev("req-0", DRIVER_A, POOL1, D1))]


def test_other_node() -> None:
    result = allocate(
        [claim("claim-0", request("req-0", CLASS_A))], [cls(CLASS_A, DRIVER_A)],
        [one_device("slice-1", DRIVER_B, POOL1), one_device("slice-2", DRIVER_A, POOL2, node=NODE2)], node=NODE2,
    )
    assert result == [one(local(NODE2), dev("req-0", DRIVER_A, POOL2, D1))]


def _sized(*sizes: tuple[str, str]) -> dict[str, Any]:
    return resource_slice("slice-1", DRIVER_A, node=NODE1, pool=POOL1,
                          devices=[device(name, capacity={"memory": size}) for name, size in sizes])


@pytest.mark.parametrize("order", [((D1, "1Gi"), (D2, "2Gi")), ((D2, "2Gi"), (D1, "1Gi"))],
                         ids=["small-and-large", "small-and-large-backtrack-requests"])
def test_small_and_large(order: tuple[tuple[str, str], ...]) -> None:
    result = allocate(
        [claim("claim-0", request("req-0", CLASS_A, 1, memory("1Gi")), request("req-1", CLASS_A, 1, memory("2Gi")))],
        [cls(CLASS_A, DRIVER_A)], [_sized(*order)],
    )
    assert result == [one(local(NODE1), dev("req-0", DRIVER_A, POOL1, D1), dev("req-1", DRIVER_A, POOL1, D2))]


def test_small_and_large_backtrack_claims() -> None:
    result = allocate(
        [claim("claim-0", request("req-0", CLASS_A, 1, memory("1Gi"))),
         claim("claim-1", request("req-1", CLASS_A, 1, memory("2Gi")))],
        [cls(CLASS_A, DRIVER_A)], [_sized((D2, "2Gi"), (D1, "1Gi"))],
    )
    assert result == [one(local(NODE1), dev("req-0", DRIVER_A, POOL1, D1)),
                      one(local(NODE1), dev("req-1", DRIVER_A, POOL1, D2))]


def test_devices_split_across_different_slices() -> None:
    result = allocate([claim("claim-0", request("req-0", CLASS_A, 2))], [cls(CLASS_A, DRIVER_A)],
                      [one_device("slice-1", DRIVER_A, POOL1), one_device("slice-2", DRIVER_A, POOL2)])
    assert result == [one(local(NODE1), dev("req-0", DRIVER_A, POOL1, D1), dev("req-0", DRIVER_A, POOL2, D1))]


def test_obsolete_slice() -> None:
    slices = [
        resource_slice("slice-1-obsolete", DRIVER_A, node=NODE1, pool=POOL1, count=2, devices=[device(D1)]),
        resource_slice("slice-1-new", DRIVER_A, node=NODE1, pool=POOL1, count=2, generation=2, devices=[device(D2)]),
    ]
    assert allocate([claim("claim-0", request("req-0", CLASS_A))], [cls(CLASS_A, DRIVER_A)], slices) is None


def test_duplicate_slice() -> None:
    slices = [one_device("slice-1", DRIVER_A, POOL1, count=2), one_device("slice-1-2", DRIVER_A, POOL1, count=2)]
    with pytest.raises(InvalidPools, match="invalid resource pools were encountered"):
        allocate([claim("claim-0", request("req-0", CLASS_A))], [cls(CLASS_A, DRIVER_A)], slices)


@pytest.mark.parametrize(("claims", "slices"), [
    pytest.param([claim("claim-0", request("req-0", CLASS_A))], [], id="no-slices"),
    pytest.param([claim("claim-0", request("req-0", CLASS_A)), claim("claim-0", request("req-1", CLASS_A))],
                 [one_device("slice-1", DRIVER_A, POOL1)], id="not-enough-suitable-devices"),
    pytest.param([claim("claim-0", request("req-0", CLASS_A, mode="All"))],
                 [resource_slice("slice-1", DRIVER_A, node=NODE1, pool=POOL1)], id="all-devices-slice-without-devices"),
    pytest.param([claim("claim-0", request("req-0", CLASS_A, mode="All"))], [], id="all-devices-no-slices"),
    pytest.param([claim("claim-1", request("req-0", CLASS_A, 1)),
                  claim("claim-0", request("req-0", CLASS_A, mode="All"))],
                 [one_device("slice-1", DRIVER_A, POOL1)], id="all-devices-no-solution"),
    pytest.param([claim("claim-0", request("req-0", CLASS_A, mode="All")),
                  claim("claim-1", request("req-0", CLASS_A, 1))],
                 [one_device("slice-1", DRIVER_A, POOL1)], id="all-devices-no-solution-reversed"),
    pytest.param([claim("claim-0", request("req-0", CLASS_A))],
                 [one_device("slice-1", DRIVER_A, POOL1, node=None,
                             node_selector={"nodeSelectorTerms": [{"matchExpressions": [
                                 {"key": "region", "operator": "In", "values": ["region-2"]}]}]})],
                 id="unsuccessful-allocation-network-attached-device"),
])
def test_no_allocation(claims: list[dict[str, Any]], slices: list[dict[str, Any]]) -> None:
    assert allocate(claims, [cls(CLASS_A, DRIVER_A)], slices) is None


def test_no_claims_to_allocate() -> None:
    assert allocate([], [cls(CLASS_A, DRIVER_A)], [one_device("slice-1", DRIVER_A, POOL1)]) == []


@pytest.mark.parametrize(("claim_obj", "classes", "message"), [
    (claim("claim-0", request("req-0", CLASS_A)), [], "could not retrieve device class class-a"),
    (claim("claim-0", request("req-0", "unknown-class")), [cls(CLASS_A, DRIVER_A)],
     "could not retrieve device class unknown-class"),
    (claim("claim-0", request("req-0", "")), [cls(CLASS_A, DRIVER_A)],
     "claim default/claim-0, request req-0: missing device class name (unsupported request type?)"),
    (claim("claim-0", request("req-0", CLASS_A, 1, None)), [cls(CLASS_A, DRIVER_A)],
     "CEL expression empty (unsupported selector type?)"),
    (claim("claim-0", request("req-0", CLASS_A, 1, mode="future-mode")), [cls(CLASS_A, DRIVER_A)],
     "unsupported count mode future-mode"),
    (claim("claim-0", request("req-0", CLASS_A), constraints=[{}]), [cls(CLASS_A, DRIVER_A)],
     "empty constraint (unsupported constraint type?)"),
    (claim("claim-0", request("req-0", CLASS_A, 1, "noSuchVar")), [cls(CLASS_A, DRIVER_A)],
     "undeclared reference"),
    (claim("claim-0", request("req-0", CLASS_A)), [device_class(CLASS_A, "noSuchVar")], "undeclared reference"),
    (claim("claim-0", request("req-0", CLASS_A, None, "noSuchVar", mode="All")), [cls(CLASS_A, DRIVER_A)],
     "undeclared reference"),
    (claim("claim-0", request("req-0", CLASS_A, 500)), [cls(CLASS_A, DRIVER_A)], "exceeds the claim limit"),
    (claim("claim-0", request("req-0", CLASS_A, 32), request("req-1", CLASS_A, 1)), [cls(CLASS_A, DRIVER_A)],
     "exceeds the claim limit"),
], ids=["no-classes", "unknown-class", "empty-class", "unknown-selector", "unknown-allocation-mode",
        "unknown-constraint", "invalid-CEL-one-device", "invalid-CEL-one-device-class", "invalid-CEL-all-devices",
        "too-many-devices-single-request", "too-many-devices-total"])
def test_errors(claim_obj: dict[str, Any], classes: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(AllocationError) as error:
        allocate([claim_obj], classes, [many("slice-1", DRIVER_A, POOL1, 33)])
    assert message in str(error.value)


def test_many_devices_okay() -> None:
    result = allocate([claim("claim-0", request("req-0", CLASS_A, 32))], [cls(CLASS_A, DRIVER_A)],
                      [many("slice-1", DRIVER_A, POOL1, 32)])
    assert result is not None and len(result[0][1]) == 32


def test_all_devices() -> None:
    single = allocate([claim("claim-0", request("req-0", CLASS_A, mode="All"))], [cls(CLASS_A, DRIVER_A)],
                      [one_device("slice-1", DRIVER_A, POOL1)])
    assert single == [one(local(NODE1), dev("req-0", DRIVER_A, POOL1, D1))]
    both = allocate([claim("claim-0", request("req-0", CLASS_A, mode="All"))], [cls(CLASS_A, DRIVER_A)],
                    [one_device("slice-1", DRIVER_A, POOL1), one_device("slice-1b", DRIVER_A, POOL2)])
    assert both == [one(local(NODE1), dev("req-0", DRIVER_A, POOL1, D1), dev("req-0", DRIVER_A, POOL2, D1))]


def test_all_devices_of_the_incomplete_pool() -> None:
    with pytest.raises(AllocationError, match="claim default/claim-0, request req-0: asks for all devices, but "
                                              "resource pool driver-a/pool-1 is currently being updated"):
        allocate([claim("claim-0", request("req-0", CLASS_A, 1, mode="All"))], [cls(CLASS_A, DRIVER_A)],
                 [one_device("slice-1", DRIVER_A, POOL1, count=2)])


def test_all_devices_plus_another() -> None:
    """all-devices-plus-another(-reversed): the All claim takes the one device, the other claim
    can only use the second driver's."""
    slices = [one_device("slice-1", DRIVER_A, POOL1), one_device("slice-2", DRIVER_B, POOL1)]
    result = allocate([claim("claim-0", request("req-0", CLASS_A, mode="All")),
                       claim("claim-1", request("req-0", CLASS_B, 1))],
                      [cls(CLASS_A, DRIVER_A), cls(CLASS_B, DRIVER_B)], slices)
    assert result == [one(local(NODE1), dev("req-0", DRIVER_A, POOL1, D1)),
                      one(local(NODE1), dev("req-0", DRIVER_B, POOL1, D1))]


def test_all_devices_some_allocated() -> None:
    two = resource_slice("slice-1", DRIVER_A, node=NODE1, pool=POOL1, devices=[device(D1), device(D2)])
    allocated = [(DRIVER_A, POOL1, D1)]
    assert allocate([claim("claim-0", request("req-0", CLASS_A, mode="All"))], [cls(CLASS_A, DRIVER_A)], [two],
                    allocated=allocated) is None
    # all-devices-some-allocated-admin-access
    result = allocate([claim("claim-0", request("req-0", CLASS_A, mode="All", admin_access=True))],
                      [cls(CLASS_A, DRIVER_A)], [two], allocated=allocated)
    assert result == [one(local(NODE1), dev("req-0", DRIVER_A, POOL1, D1, True),
                          dev("req-0", DRIVER_A, POOL1, D2, True))]
    # count-devices-some-allocated-admin-access
    result = allocate([claim("claim-0", request("req-0", CLASS_A, 2, admin_access=True))],
                      [cls(CLASS_A, DRIVER_A)], [two], allocated=allocated)
    assert result == [one(local(NODE1), dev("req-0", DRIVER_A, POOL1, D1, True),
                          dev("req-0", DRIVER_A, POOL1, D2, True))]
    # all-devices-some-allocating-admin-access: the first request holds a device the second needs
    assert allocate([claim("claim-0", request("req-0", CLASS_A, 1, admin_access=True),
                           request("req-1", CLASS_A, mode="All", admin_access=True))],
                    [cls(CLASS_A, DRIVER_A)], [two]) is None


def test_separate_claims_share_device_admin_access() -> None:
    result = allocate([claim("claim-0", request("req-0", CLASS_A, 1, admin_access=True)),
                       claim("claim-1", request("req-0", CLASS_A, 1, admin_access=True))],
                      [cls(CLASS_A, DRIVER_A)], [one_device("slice-1", DRIVER_A, POOL1)])
    assert result == [one(local(NODE1), dev("req-0", DRIVER_A, POOL1, D1, True))] * 2


def test_admin_access_enabled_and_allocated_devices() -> None:
    allocated = [(DRIVER_A, POOL1, D1), (DRIVER_A, POOL1, D2)]
    slices = [one_device("slice-1", DRIVER_A, POOL1)]
    assert allocate([claim("claim-0", request("req-0", CLASS_A))], [cls(CLASS_A, DRIVER_A)], slices,
                    allocated=allocated) is None  # already-allocated-devices
    result = allocate([claim("claim-0", request("req-0", CLASS_A, 1, admin_access=True))], [cls(CLASS_A, DRIVER_A)],
                      slices, allocated=allocated)
    assert result == [one(local(NODE1), dev("req-0", DRIVER_A, POOL1, D1, True))]


def _selector(*requirements: tuple[str, str]) -> dict[str, Any]:
    return {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": key, "operator": "In", "values": [value]} for key, value in requirements]}]}


def test_network_attached_devices() -> None:
    region = _selector(("region", "region-1"))
    result = allocate([claim("claim-0", request("req-0", CLASS_A))], [cls(CLASS_A, DRIVER_A)],
                      [one_device("slice-1", DRIVER_A, POOL1, node=None, node_selector=region)])
    assert result == [one((("label", "region", ("region-1",)),), dev("req-0", DRIVER_A, POOL1, D1))]
    # many-network-attached-devices: the union of the selectors
    slices = [
        one_device("slice-1", DRIVER_A, POOL1, node=None, node_selector=region),
        one_device("slice-2", DRIVER_A, POOL2, node=None, all_nodes=True),
        one_device("slice-3", DRIVER_A, POOL3, node=None, node_selector=_selector(("planet", "earth"))),
        one_device("slice-4", DRIVER_A, POOL4, node=None, node_selector={"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [NODE1]}]}]}),
    ]
    result = allocate([claim("claim-0", request("req-0", CLASS_A, 4))], [cls(CLASS_A, DRIVER_A)], slices)
    union = (("field", "metadata.name", (NODE1,)), ("label", "planet", ("earth",)), ("label", "region", ("region-1",)))
    assert result == [one(union, *(dev("req-0", DRIVER_A, pool, D1) for pool in (POOL1, POOL2, POOL3, POOL4)))]
    # local-and-network-attached-devices: a node-local device pins the claim to the node
    result = allocate([claim("claim-0", request("req-0", CLASS_A, 2))], [cls(CLASS_A, DRIVER_A)],
                      [slices[0], one_device("slice-5", DRIVER_A, POOL2)])
    assert result == [one(local(NODE1), dev("req-0", DRIVER_A, POOL1, D1), dev("req-0", DRIVER_A, POOL2, D1))]


def test_several_different_drivers() -> None:
    slices = [resource_slice("slice-1", DRIVER_A, node=NODE1, pool=POOL1, devices=[device(D1), device(D2)]),
              one_device("slice-1b", DRIVER_B, POOL1)]
    result = allocate([claim("claim-0", request("req-0", CLASS_A)), claim("claim-0", request("req-0", CLASS_B))],
                      [cls(CLASS_A, DRIVER_A), cls(CLASS_B, DRIVER_B)], slices)
    assert result == [one(local(NODE1), dev("req-0", DRIVER_A, POOL1, D1)),
                      one(local(NODE1), dev("req-0", DRIVER_B, POOL1, D1))]


ATTRS = {"driverVersion": {"version": "1.0.0"}, "numa": 1, "stringAttribute": "stringAttributeValue",
         "boolAttribute": True}


def _match(attribute: str, requests: Sequence[str] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {"matchAttribute": f"{DRIVER_A}/{attribute}"}
    if requests:
        out["requests"] = list(requests)
    return out


def test_with_constraint() -> None:
    slices = [resource_slice("slice-1", DRIVER_A, node=NODE1, pool=POOL1,
                             devices=[device(D1, ATTRS), device(D2, ATTRS)])]
    constraints = [_match("numa"), _match("driverVersion"), _match("stringAttribute"), _match("boolAttribute")]
    result = allocate([claim("claim-0", request("req-0", CLASS_A), request("req-1", CLASS_A), constraints=constraints)],
                      [cls(CLASS_A, DRIVER_A)], slices)
    assert result == [one(local(NODE1), dev("req-0", DRIVER_A, POOL1, D1), dev("req-1", DRIVER_A, POOL1, D2))]
    # with-constraint-non-existent-attribute
    assert allocate([claim("claim-0", request("req-0", CLASS_A), constraints=[_match("NonExistentAttribute")])],
                    [cls(CLASS_A, DRIVER_A)], [one_device("slice-1", DRIVER_A, POOL1)]) is None


@pytest.mark.parametrize(("attribute", "first", "second"), [
    ("numa", 1, 2), ("stringAttribute", "stringAttributeValue", "stringAttributeValue2"),
    ("boolAttribute", True, False), ("driverVersion", {"version": "1.0.0"}, {"version": "2.0.0"}),
], ids=["int", "string", "bool", "version"])
def test_with_constraint_not_matching(attribute: str, first: Any, second: Any) -> None:
    slices = [resource_slice("slice-1", DRIVER_A, node=NODE1, pool=POOL1,
                             devices=[device(D1, {attribute: first}), device(D2, {attribute: second})])]
    assert allocate([claim("claim-0", request("req-0", CLASS_A, 2), constraints=[_match(attribute)])],
                    [cls(CLASS_A, DRIVER_A), cls(CLASS_B, DRIVER_B)], slices) is None


def test_with_constraint_not_matching_int_attribute_all_devices() -> None:
    slices = [resource_slice("slice-1", DRIVER_A, node=NODE1, pool=POOL1,
                             devices=[device(D1, {"numa": 1}), device(D2, {"numa": 2})])]
    with pytest.raises(AllocationError, match="claim default/claim-0, request req-0: cannot add device "
                                              "driver-a/pool-1/device-2 because a claim constraint would not be "
                                              "satisfied"):
        allocate([claim("claim-0", request("req-0", CLASS_A, 0, mode="All"), constraints=[_match("numa")])],
                 [cls(CLASS_A, DRIVER_A)], slices)


def test_with_constraint_for_request() -> None:
    slices = [resource_slice("slice-1", DRIVER_A, node=NODE1, pool=POOL1, devices=[
        device(D1, {"driverVersion": {"version": "1.0.0"}}), device(D2, {"driverVersion": {"version": "2.0.0"}})])]
    result = allocate([claim("claim-0", request("req-0", CLASS_A), request("req-1", CLASS_A),
                             constraints=[_match("driverVersion", ["req-0"])])], [cls(CLASS_A, DRIVER_A)], slices)
    assert result == [one(local(NODE1), dev("req-0", DRIVER_A, POOL1, D1), dev("req-1", DRIVER_A, POOL1, D2))]


def test_with_constraint_for_request_retry() -> None:
    slices = [resource_slice("slice-1", DRIVER_A, node=NODE1, pool=POOL1, devices=[
        device(D1, {"driverVersion": {"version": "1.0.0"}, "stringAttribute": "a"}),
        device(D2, {"driverVersion": {"version": "2.0.0"}, "stringAttribute": "b"}),
        device(D3, {"driverVersion": {"version": "3.0.0"}, "stringAttribute": "b"}),
    ])]
    result = allocate([claim("claim-0", request("req-0", CLASS_A), request("req-1", CLASS_A),
                             constraints=[_match("driverVersion", ["req-0"]), _match("stringAttribute")])],
                      [cls(CLASS_A, DRIVER_A)], slices)
    assert result == [one(local(NODE1), dev("req-0", DRIVER_A, POOL1, D2), dev("req-1", DRIVER_A, POOL1, D3))]


def _opaque(driver: str, attribute: str) -> dict[str, Any]:
    return {"opaque": {"driver": driver, "parameters": {attribute: attribute + "Value"}}}


def test_device_configs() -> None:
    result = allocate([claim("claim-0", request("req-0", CLASS_A))],
                      [cls(CLASS_A, DRIVER_A, config=[_opaque(DRIVER_A, "classAttribute")])],
                      [one_device("slice-1", DRIVER_A, POOL1)])
    assert result == [one(local(NODE1), dev("req-0", DRIVER_A, POOL1, D1), config=[
        {"source": "FromClass", "requests": ["req-0"], **_opaque(DRIVER_A, "classAttribute")}])]
    # with-class-device-config-with-multiple-request-and-configs
    result = allocate(
        [claim("claim-0", request("req-0", CLASS_A), request("req-1", CLASS_A), request("req-2", CLASS_B))],
        [cls(CLASS_A, DRIVER_A, config=[_opaque(DRIVER_A, "classAttribute-A")]),
         cls(CLASS_B, DRIVER_B, config=[_opaque(DRIVER_B, "classAttribute-B")])],
        [many("slice-1", DRIVER_A, POOL1, 2), one_device("slice-2", DRIVER_B, POOL1)],
    )
    assert result == [one(local(NODE1), dev("req-0", DRIVER_A, POOL1, D0), dev("req-1", DRIVER_A, POOL1, D1),
                          dev("req-2", DRIVER_B, POOL1, D1), config=[
        {"source": "FromClass", "requests": ["req-0", "req-1"], **_opaque(DRIVER_A, "classAttribute-A")},
        {"source": "FromClass", "requests": ["req-2"], **_opaque(DRIVER_B, "classAttribute-B")},
    ])]
    # claim-with-device-config
    result = allocate([claim("claim-0", request("req-0", CLASS_A), config=[_opaque(DRIVER_A, "deviceAttribute")])],
                      [cls(CLASS_A, DRIVER_A)], [one_device("slice-1", DRIVER_A, POOL1)])
    assert result == [one(local(NODE1), dev("req-0", DRIVER_A, POOL1, D1), config=[
        {"source": "FromClaim", **_opaque(DRIVER_A, "deviceAttribute")}])]


# ---------------------------------------------------------------------------- firstAvailable


def test_prioritized_list_first_unavailable() -> None:
    result = allocate([claim("claim-0", first_available("req-0", sub_request("subReq-0", CLASS_B, 1),
                                                         sub_request("subReq-1", CLASS_A, 1)))],
                      [cls(CLASS_A, DRIVER_A), cls(CLASS_B, DRIVER_B)], [one_device("slice-1", DRIVER_A, POOL1)])
    assert result == [one(local(NODE1), dev("req-0/subReq-1", DRIVER_A, POOL1, D1))]
    # prioritized-list-too-many-in-first-subrequest: 500 devices is not an error in an alternative
    result = allocate([claim("claim-0", first_available("req-0", sub_request("subReq-0", CLASS_B, 500),
                                                         sub_request("subReq-1", CLASS_A, 1)))],
                      [cls(CLASS_A, DRIVER_A), cls(CLASS_B, DRIVER_B)], [one_device("slice-1", DRIVER_A, POOL1)])
    assert result == [one(local(NODE1), dev("req-0/subReq-1", DRIVER_A, POOL1, D1))]


def test_prioritized_list_non_available() -> None:
    assert allocate([claim("claim-0", first_available("req-0", sub_request("subReq-0", CLASS_B, 2),
                                                       sub_request("subReq-1", CLASS_A, 2)))],
                    [cls(CLASS_A, DRIVER_A), cls(CLASS_B, DRIVER_B)],
                    [one_device("slice-1", DRIVER_A, POOL1), one_device("slice-2", DRIVER_B, POOL2)]) is None


def test_prioritized_list_subrequests_with_expressions() -> None:
    result = allocate(
        [claim("claim-0", request("req-0", CLASS_A, 1, memory("1Gi")),
               first_available("req-1", sub_request("subReq-0", CLASS_A, 1, memory("4Gi")),
                               sub_request("subReq-1", CLASS_A, 2, memory("2Gi"))))],
        [cls(CLASS_A, DRIVER_A)], [_sized((D1, "2Gi"), (D2, "2Gi"), (D3, "1Gi"))],
    )
    assert result == [one(local(NODE1), dev("req-0", DRIVER_A, POOL1, D3), dev("req-1/subReq-1", DRIVER_A, POOL1, D1),
                          dev("req-1/subReq-1", DRIVER_A, POOL1, D2))]


def test_prioritized_list_subrequests_with_constraints_ref_parent_request() -> None:
    slices = [
        resource_slice("slice-1", DRIVER_A, node=NODE1, pool=POOL1, devices=[
            device(D1, {"driverVersion": {"version": "1.0.0"}}, {"memory": "8Gi"})]),
        resource_slice("slice-2", DRIVER_A, node=NODE1, pool=POOL2, devices=[
            device(D2, {"driverVersion": {"version": "2.0.0"}}, {"memory": "2Gi"}),
            device(D3, {"driverVersion": {"version": "1.0.0"}}, {"memory": "1Gi"})]),
    ]
    result = allocate(
        [claim("claim-0", request("req-0", CLASS_A, 1, memory("8Gi")),
               first_available("req-1", sub_request("subReq-0", CLASS_A, 1, memory("2Gi")),
                               sub_request("subReq-1", CLASS_A, 1, memory("1Gi"))),
               constraints=[_match("driverVersion", ["req-0", "req-1"])])],
        [cls(CLASS_A, DRIVER_A)], slices,
    )
    assert result == [one(local(NODE1), dev("req-0", DRIVER_A, POOL1, D1), dev("req-1/subReq-1", DRIVER_A, POOL2, D3))]


def test_prioritized_list_allocation_mode_all() -> None:
    two = resource_slice("slice-1", DRIVER_A, node=NODE1, pool=POOL1, devices=[device(D1), device(D2)])
    # prioritized-list-subrequests-with-allocation-mode-all: one device taken, "all" fails, the next wins
    result = allocate([claim("claim-0", first_available("req-0", sub_request("subReq-0", CLASS_A, 0, mode="All"),
                                                         sub_request("subReq-1", CLASS_A, 1)))],
                      [cls(CLASS_A, DRIVER_A)], [two], allocated=[(DRIVER_A, POOL1, D1)])
    assert result == [one(local(NODE1), dev("req-0/subReq-1", DRIVER_A, POOL1, D2))]
    # prioritized-list-allocation-mode-all-multiple-requests
    result = allocate([claim("claim-0", request("req-0", CLASS_A, 1),
                             first_available("req-1", sub_request("subReq-0", CLASS_A, 0, mode="All"),
                                             sub_request("subReq-1", CLASS_A, 1)))],
                      [cls(CLASS_A, DRIVER_A)], [two])
    assert result == [one(local(NODE1), dev("req-0", DRIVER_A, POOL1, D1), dev("req-1/subReq-1", DRIVER_A, POOL1, D2))]


def _eight_and_four() -> list[dict[str, Any]]:
    return [resource_slice(name, DRIVER_A, node=NODE1, pool=pool, devices=[device(dev_name, capacity={"memory": size})])
            for name, pool, dev_name, size in (("slice-1", POOL1, D1, "8Gi"), ("slice-2", POOL2, D2, "4Gi"))]


def test_prioritized_list_multi_request_and_backtracking() -> None:
    alternatives = first_available("req-0", sub_request("subReq-0", CLASS_A, 1, memory("8Gi")),
                                   sub_request("subReq-1", CLASS_A, 1, memory("4Gi")))
    big = request("req-1", CLASS_A, 1, memory("8Gi"))
    expected = [one(local(NODE1), dev("req-1", DRIVER_A, POOL1, D1), dev("req-0/subReq-1", DRIVER_A, POOL2, D2))]
    assert allocate([claim("claim-0", big, alternatives)], [cls(CLASS_A, DRIVER_A)], _eight_and_four()) == expected
    assert allocate([claim("claim-0", alternatives, big)], [cls(CLASS_A, DRIVER_A)], _eight_and_four()) == expected


def test_prioritized_list_max_allocation_limit_request() -> None:
    alternatives = [sub_request("subReq-0", CLASS_A, 32), sub_request("subReq-1", CLASS_A, 16)]
    result = allocate([claim("claim-0", first_available("req-0", *alternatives),
                             first_available("req-1", *alternatives))],
                      [cls(CLASS_A, DRIVER_A)], [many("slice-1", DRIVER_A, POOL1, 64)])
    assert result is not None
    ((_, devices, _),) = result
    assert [d[0] for d in devices].count("req-0/subReq-1") == 16
    assert [d[0] for d in devices].count("req-1/subReq-1") == 16


# ---------------------------------------------------------------------------- taints


def _tainted(*devices: dict[str, Any]) -> list[dict[str, Any]]:
    return [resource_slice("slice-1", DRIVER_A, node=NODE1, pool=POOL1, devices=list(devices))]


def test_tainted_devices() -> None:
    classes = [cls(CLASS_A, DRIVER_A)]
    one_request = [claim("claim-0", request("req-0", CLASS_A))]
    two = _tainted(device(D1, taints=[NO_SCHEDULE]), device(D2, taints=[NO_EXECUTE]))
    assert allocate(one_request, classes, two) is None  # tainted-two-devices
    assert allocate(one_request, classes, _tainted(device(D1, taints=[NO_SCHEDULE, NO_EXECUTE]))) is None
    # tainted-two-devices-tolerated: only the second device's taint is tolerated
    result = allocate([claim("claim-0", request("req-0", CLASS_A, tolerations=[TOLERATE_NO_EXECUTE]))], classes, two)
    assert result == [one(local(NODE1), dev("req-0", DRIVER_A, POOL1, D2, None, ("Equaltaint-key",)))]
    # tainted-two-devices-prioritized-list-tolerated
    result = allocate([claim("claim-0", first_available(
        "req-0", sub_request("subReq-0", CLASS_A, 1), sub_request("subReq-1", CLASS_A, 1,
                                                                   tolerations=[TOLERATE_NO_EXECUTE])))], classes, two)
    assert result == [one(local(NODE1), dev("req-0/subReq-1", DRIVER_A, POOL1, D2, None, ("Equaltaint-key",)))]
    # tainted-no-effect
    result = allocate(one_request, classes, _tainted(device(D1, taints=[TAINT_NONE])))
    assert result == [one(local(NODE1), dev("req-0", DRIVER_A, POOL1, D1))]
    # tainted-one-device-two-taints-both-tolerated
    result = allocate([claim("claim-0", request("req-0", CLASS_A, tolerations=[TOLERATE_NO_SCHEDULE,
                                                                               TOLERATE_NO_EXECUTE]))],
                      classes, _tainted(device(D1, taints=[NO_SCHEDULE, NO_EXECUTE])))
    assert result == [one(local(NODE1), dev("req-0", DRIVER_A, POOL1, D1, None, ("Existstaint-key", "Equaltaint-key")))]


def test_tainted_prioritized_list_admin_access_and_all() -> None:
    tainted = _tainted(device(D1, taints=[NO_SCHEDULE]))
    assert allocate([claim("claim-0", first_available("req-0", sub_request("subReq-0", CLASS_B, 1),
                                                       sub_request("subReq-1", CLASS_A, 1)))],
                    [cls(CLASS_A, DRIVER_A), cls(CLASS_B, DRIVER_B)], tainted) is None
    assert allocate([claim("claim-0", request("req-0", CLASS_A, 1, admin_access=True))], [cls(CLASS_A, DRIVER_A)],
                    tainted, allocated=[(DRIVER_A, POOL1, D1), (DRIVER_A, POOL1, D2)]) is None
    assert allocate([claim("claim-0", request("req-0", CLASS_A, mode="All"))], [cls(CLASS_A, DRIVER_A)],
                    tainted) is None


# ---------------------------------------------------------------------------- pools


def test_pools_per_node_and_generations() -> None:
    """gather_pools: only the slices reaching the node, the newest generation, incomplete pools."""
    slices = [parse_resource_slice(s) for s in (
        one_device("a", DRIVER_A, POOL1, count=2),
        resource_slice("b", DRIVER_A, pool=POOL1, count=2, all_nodes=True, devices=[device(D2)]),
        one_device("c", DRIVER_B, POOL2, node=NODE2),
        one_device("d", DRIVER_B, POOL3, count=2),
    )]
    pools = gather_pools(slices, NODE1, LABELS[NODE1])
    assert [(p.driver, p.pool, p.incomplete, p.invalid, [s.name for s in p.slices]) for p in pools] == [
        (DRIVER_A, POOL1, False, False, ["a", "b"]), (DRIVER_B, POOL3, True, False, [])]
    # the same device name twice in a pool: invalid
    duplicate = [parse_resource_slice(one_device(name, DRIVER_A, POOL1, count=2)) for name in ("a", "b")]
    (pool,) = gather_pools(duplicate, NODE1, LABELS[NODE1])
    assert pool.invalid and pool.invalid_reason == "duplicate device name device-1"


def test_partitionable_devices_counters() -> None:
    """partitionable-devices-single-device / -no-capacity-available: devices drawing on one counter
    set fit only while the set lasts."""
    slices = [
        resource_slice("slice-1", DRIVER_A, node=NODE1, pool=POOL1, count=2,
                       counters={"counter-set-1": {"memory": "8Gi"}}),
        resource_slice("slice-2", DRIVER_A, node=NODE1, pool=POOL1, count=2, devices=[
            device(D0, consumes=[("counter-set-1", {"memory": "4Gi"})]),
            device(D1, consumes=[("counter-set-1", {"memory": "6Gi"})]),
        ]),
    ]
    result = allocate([claim("claim-0", request("req-0", CLASS_A, 1))], [cls(CLASS_A, DRIVER_A)], slices)
    assert result == [one(local(NODE1), dev("req-0", DRIVER_A, POOL1, D0))]
    assert allocate([claim("claim-0", request("req-0", CLASS_A, 2))], [cls(CLASS_A, DRIVER_A)], slices) is None
