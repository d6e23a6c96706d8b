"""The DRA allocator against kube v1.36's test rows for what its `incubating` allocator adds to
`stable` (`allocator_testing.go`, names kept): binding conditions, consumable capacity
(`allowMultipleAllocations`, capacity requests and request policies, shares), `distinctAttribute`,
and the search by combinations (the `check-combinations-*` rows, with kube's count of search steps).
Also kube's `consumable_capacity_test.go` (the rounding and policy rules).

Rows for a feature switched off (`binding-conditions-without-feature-gate`,
`consumable-capacity-disabled-feature*`) are not replayed: kube v1.36 has both on by default, and
Placer has no switch for them. kube replaces every share ID by one fixed UUID before comparing;
here a share shows as `shared=True` (its ID is filled in when the allocation is reserved)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import pytest
from placer.engine.allocator import (
    AllocatedState,
    AllocationError,
    Allocator,
    consumed_capacity,
    gather_pools,
    request_fits,
)
from placer.engine.devices import (
    CapacityPolicy,
    CapacityRange,
    Device,
    DeviceCapacity,
    parse_device_class,
    parse_resource_claim,
    parse_resource_slice,
)
from placer.engine.quantity import parse_quantity_with_format
from placer.testing_devices import (
    capacity_policy,
    device,
    device_class,
    first_available,
    request,
    resource_claim,
    resource_slice,
    sub_request,
)

NODE1 = "node-1"
LABELS = {"region": "region-1", "planet": "earth"}
CLASS_A, CLASS_B = "class-a", "class-b"
DRIVER_A = "driver-a"
POOL1, POOL2 = "pool-1", "pool-2"
D1, D2, D3, D4 = "device-1", "device-2", "device-3", "device-4"
CAP0, CAP1 = "capacity-0", "capacity-1"
LOCAL = (("field", "metadata.name", (NODE1,)),)


def cls(name: str = CLASS_A, driver: str = DRIVER_A) -> dict[str, Any]:
    return device_class(name, f'device.driver == "{driver}"')


def multi_cls(multiple: bool, name: str = CLASS_A) -> dict[str, Any]:
    """kube's `classWithAllowMultipleAllocations`."""
    return device_class(name, f'device.driver == "{DRIVER_A}" && device.allowMultipleAllocations == '
                              f'{"true" if multiple else "false"}')


def in_range(value: str) -> dict[str, Any]:
    """kube's `withCapacityRequestPolicyRange`: default 2, valid from 2 to 4 in steps of 2."""
    return capacity_policy(value, default="2", minimum="2", step="2", maximum="4")


def valid_values(default: str, value: str, *more: str) -> dict[str, Any]:
    """kube's `withCapacityRequestPolicyValidValues`: the default, then `more`."""
    return capacity_policy(value, default=default, valid_values=[default, *more])


def slice_of(*devices: dict[str, Any], name: str = "slice-1", pool: str = POOL1, count: int = 1,
             **kwargs: Any) -> dict[str, Any]:
    return resource_slice(name, DRIVER_A, node=NODE1, pool=pool, count=count, devices=list(devices), **kwargs)


def claim(name: str, *requests: dict[str, Any], constraints: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    return resource_claim(name, namespace="", requests=requests, constraints=constraints)


def cap(amount: str) -> dict[str, str]:
    """kube's `withCapacityRequest`: a request for `amount` of capacity-0."""
    return {CAP0: amount}


Result = tuple[str, str, str, bool, tuple[tuple[str, str], ...] | None, tuple[str, ...], tuple[str, ...]]


def dev(request_name: str, name: str, pool: str = POOL1, *, shared: bool = False,
        consumed: Mapping[str, str] | None = None, conditions: Sequence[str] = (),
        failures: Sequence[str] = ()) -> Result:
    """One expected result: request, pool, device, a share?, its consumed capacity, binding conditions."""
    return (request_name, pool, name, shared, None if consumed is None else tuple(sorted(consumed.items())),
            tuple(conditions), tuple(failures))


def allocate(
    claims: Sequence[dict[str, Any]], classes: Sequence[dict[str, Any]], slices: Sequence[dict[str, Any]],
    state: AllocatedState | None = None, steps: int | None = None,
) -> list[tuple[Any, list[Result]]] | None:
    """Each claim's (node selector, sorted results), or None when they do not fit; `steps`: kube's
    expected NumAllocateOneInvocations."""
    by_name = {c["metadata"]["name"]: parse_device_class(c) for c in classes}
    parsed = [parse_resource_slice(s) for s in slices]
    allocator = Allocator(by_name.get, state or AllocatedState())
    results = allocator.allocate(NODE1, LABELS, gather_pools(parsed, NODE1, LABELS),
                                 [parse_resource_claim(c) for c in claims])
    if steps is not None:
        assert allocator.invocations == steps
    if results is None:
        return None
    out = []
    for result in results:
        selector = None
        if result.node_selector is not None:
            (term,) = result.node_selector
            selector = tuple(sorted([("label", r.key, tuple(r.values)) for r in term.expressions]
                                    + [("field", r.key, tuple(r.values)) for r in term.fields]))
        devices = sorted(
            (d.request, d.pool, d.device, d.share_id == "",
             None if d.consumed_capacity is None
             else tuple(sorted((k, str(q)) for k, q in d.consumed_capacity.items())),
             d.binding_conditions, d.binding_failure_conditions)
            for d in result.devices
        )
        out.append((selector, devices))
    return out


def one(*devices: Result, selector: Any = LOCAL) -> tuple[Any, list[Result]]:
    return (selector, sorted(devices))


# ---------------------------------------------------------------------------- binding conditions


PREPARE = (["IsPrepare"], ["BindingFailed"])


def test_device_binding_conditions() -> None:
    slices = [slice_of(device(D1, binding_conditions=["IsPrepare"], binding_failure_conditions=["BindingFailed"]))]
    assert allocate([claim("claim-0", request("req-0", CLASS_A, 1))], [cls()], slices) == [
        one(dev("req-0", D1, conditions=["IsPrepare"], failures=["BindingFailed"]))]


def test_binding_conditions_multiple_devices() -> None:
    slices = [slice_of(*(device(name, binding_conditions=[f"IsPrepare{n}"],
                                binding_failure_conditions=[f"BindingFailed{n}"])
                         for name, n in ((D1, ""), (D2, "2"), (D3, "3"))))]
    result = allocate([claim("claim-0", request("req-0", CLASS_A, 2), request("req-1", CLASS_A, 1))], [cls()], slices)
    assert result == [one(dev("req-0", D1, conditions=["IsPrepare"], failures=["BindingFailed"]),
                          dev("req-0", D2, conditions=["IsPrepare2"], failures=["BindingFailed2"]),
                          dev("req-1", D3, conditions=["IsPrepare3"], failures=["BindingFailed3"]))]


def test_binding_conditions_with_and_without() -> None:
    slices = [slice_of(device(D1), device(D2, binding_conditions=["IsPrepare"],
                                          binding_failure_conditions=["BindingFailed"]))]
    result = allocate([claim("claim-0", request("req-0", CLASS_A, 1), request("req-1", CLASS_A, 1))], [cls()], slices)
    assert result == [one(dev("req-0", D1), dev("req-1", D2, conditions=["IsPrepare"], failures=["BindingFailed"]))]


def test_node_restriction() -> None:
    """A network-attached device with `bindsToNode` is pinned to the node it was allocated for."""
    earth = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "planet", "operator": "In", "values": ["earth"]}]}]}
    slices = [resource_slice("slice-1", DRIVER_A, node_selector=earth, pool=POOL1,
                             devices=[device(D1, binds_to_node=True)])]
    assert allocate([claim("claim-0", request("req-0", CLASS_A, 1))], [cls()], slices) == [one(dev("req-0", D1))]
    # without it, the slice's selector is the allocation's
    slices = [resource_slice("slice-1", DRIVER_A, node_selector=earth, pool=POOL1, devices=[device(D1)])]
    assert allocate([claim("claim-0", request("req-0", CLASS_A, 1))], [cls()], slices) == [
        one(dev("req-0", D1), selector=(("label", "planet", ("earth",)),))]


def _counters(memory: str = "8Gi", name: str = "slice-2", count: int = 2, pool: str = POOL1,
              counter_set: str = "counter-set-1") -> dict[str, Any]:
    return resource_slice(name, DRIVER_A, node=NODE1, pool=pool, count=count,
                          counters={counter_set: {"memory": memory}})


def _drawing(name: str, memory: str, *, counter_set: str = "counter-set-1", **kwargs: Any) -> dict[str, Any]:
    """A device drawing `memory` from a counter set, its capacity that memory (kube's `fromCounters`)."""
    return device(name, capacity={"memory": memory}, consumes=[(counter_set, {"memory": memory})], **kwargs)


def test_partitionable_devices_with_binding_conditions() -> None:
    slices = [slice_of(_drawing(D1, "4Gi", binding_conditions=["IsPrepare"],
                                binding_failure_conditions=["BindingFailed"]), count=2), _counters()]
    assert allocate([claim("claim-0", request("req-0", CLASS_A, 1))], [cls()], slices) == [
        one(dev("req-0", D1, conditions=["IsPrepare"], failures=["BindingFailed"]))]


def test_partitionable_devices_with_binding_conditions_multiple() -> None:
    slices = [slice_of(_drawing(D1, "4Gi", binding_conditions=["IsPrepare"],
                                binding_failure_conditions=["BindingFailed"]),
                       _drawing(D2, "4Gi", binding_conditions=["IsPrepare2"],
                                binding_failure_conditions=["BindingFailed2"]), count=2), _counters()]
    assert allocate([claim("claim-0", request("req-0", CLASS_A, 2))], [cls()], slices) == [
        one(dev("req-0", D1, conditions=["IsPrepare"], failures=["BindingFailed"]),
            dev("req-0", D2, conditions=["IsPrepare2"], failures=["BindingFailed2"]))]


def test_partitionable_devices_with_binding_conditions_some_devices_no_conditions() -> None:
    slices = [slice_of(_drawing(D1, "2Gi", binding_conditions=["IsPrepare"],
                                binding_failure_conditions=["BindingFailed"]),
                       _drawing(D2, "2Gi"),
                       _drawing(D3, "4Gi", binding_conditions=["IsReady"],
                                binding_failure_conditions=["BindingTimeout"]),
                       count=2), _counters()]
    assert allocate([claim("claim-0", request("req-0", CLASS_A, 3))], [cls()], slices) == [
        one(dev("req-0", D1, conditions=["IsPrepare"], failures=["BindingFailed"]), dev("req-0", D2),
            dev("req-0", D3, conditions=["IsReady"], failures=["BindingTimeout"]))]


def test_partitionable_devices_with_binding_conditions_multi_slices() -> None:
    slices = [
        slice_of(_drawing(D1, "4Gi", binding_conditions=["IsPrepare"], binding_failure_conditions=["BindingFailed"]),
                 name="slice-4", count=4),
        _counters(name="slice-3", count=4),
        slice_of(_drawing(D2, "4Gi", counter_set="counter-set-2"), name="slice-2", count=4),
        _counters(name="slice-1", count=4, counter_set="counter-set-2"),
    ]
    assert allocate([claim("claim-0", request("req-0", CLASS_A, 2))], [cls()], slices) == [
        one(dev("req-0", D2), dev("req-0", D1, conditions=["IsPrepare"], failures=["BindingFailed"]))]


TAINT_KEY1 = {"key": "key1", "value": "value1", "effect": "NoSchedule"}
TOLERATE_KEY1 = {"operator": "Exists", "key": "key1", "effect": "NoSchedule"}


def test_partitionable_devices_with_binding_conditions_and_taints() -> None:
    devices = (_drawing(D1, "4Gi", binding_conditions=["IsPrepare"], binding_failure_conditions=["BindingFailed"],
                        taints=[TAINT_KEY1]), _drawing(D2, "4Gi"))
    two = [claim("claim-0", request("req-0", CLASS_A, 2))]
    # kube's row: both slices say `resourceSliceCount: 1` for pool-1, which makes the pool incomplete
    assert allocate(two, [cls()], [slice_of(*devices), _counters(count=1)]) is None
    # the same with a complete pool: the untolerated taint leaves one device
    assert allocate(two, [cls()], [slice_of(*devices, count=2), _counters()]) is None
    # partitionable-devices-with-binding-conditions-and-taints-tolerated
    tolerated = [slice_of(_drawing(D1, "4Gi", binding_conditions=["IsPrepare"],
                                   binding_failure_conditions=["BindingFailed"], taints=[TAINT_KEY1]),
                          _drawing(D2, "4Gi"), count=2), _counters()]
    result = allocate([claim("claim-0", request("req-0", CLASS_A, 2, tolerations=[TOLERATE_KEY1]))], [cls()],
                      tolerated)
    assert result == [one(dev("req-0", D1, conditions=["IsPrepare"], failures=["BindingFailed"]), dev("req-0", D2))]


def test_pools_with_binding_conditions_come_last() -> None:
    """kube's GatherPools puts the pools offering a device with binding conditions after the others:
    `a-pool` (which has one) is tried after `b-pool`."""
    slices = [slice_of(device(D1, binding_conditions=["IsPrepare"]), name="s-a", pool="a-pool"),
              slice_of(device(D1), name="s-b", pool="b-pool")]
    assert allocate([claim("claim-0", request("req-0", CLASS_A, 1))], [cls()], slices) == [
        one(dev("req-0", D1, pool="b-pool"))]
    pools = gather_pools([parse_resource_slice(s) for s in slices], NODE1, LABELS)
    assert [p.pool for p in pools] == ["b-pool", "a-pool"]


# ---------------------------------------------------------------------------- consumable capacity


def test_consumable_capacity_missing_capacity_request() -> None:
    """consumable-capacity-multi-allocatable-device-with-missing-capacity-request (and its
    allocation-mode-all variant): a request naming a capacity the device does not have."""
    slices = [slice_of(device(D1, capacity={CAP1: "1"}, multiple=True))]
    assert allocate([claim("claim-0", request("req-0", CLASS_A, 1, capacity=cap("1")))], [cls()], slices) is None
    assert allocate([claim("claim-0", request("req-0", CLASS_A, mode="All", capacity=cap("1")))],
                    [multi_cls(True)], slices) is None


def test_consumable_capacity_without_capacity_without_capacity_request() -> None:
    """Both claims share the one device; no capacity is consumed (the device has none)."""
    result = allocate([claim("claim-0", request("req-0", CLASS_A, 1)), claim("claim-1", request("req-0", CLASS_A, 1))],
                      [multi_cls(True)], [slice_of(device(D1, multiple=True))])
    assert result == [one(dev("req-0", D1, shared=True))] * 2


def test_consumable_capacity_without_policy_without_capacity_request() -> None:
    """Without a request or a policy a share takes the whole capacity: each claim its own device."""
    slices = [slice_of(device(D1, capacity={CAP0: "1"}, multiple=True),
                       device(D2, capacity={CAP0: "1"}, multiple=True))]
    result = allocate([claim("claim-0", request("req-0", CLASS_A, 1)), claim("claim-1", request("req-0", CLASS_A, 1))],
                      [multi_cls(True)], slices)
    assert result == [one(dev("req-0", D1, shared=True, consumed={CAP0: "1"})),
                      one(dev("req-0", D2, shared=True, consumed={CAP0: "1"}))]
    # ...-block: one device of capacity 2 cannot take two whole shares
    assert allocate([claim("claim-0", request("req-0", CLASS_A, 1)), claim("claim-1", request("req-0", CLASS_A, 1))],
                    [multi_cls(True)], [slice_of(device(D1, capacity={CAP0: "2"}, multiple=True))]) is None


def test_consumable_capacity_without_policy_with_capacity_request() -> None:
    result = allocate([claim("claim-0", request("req-0", CLASS_A, 1, capacity=cap("1"))),
                       claim("claim-1", request("req-0", CLASS_A, 1, capacity=cap("1")))],
                      [multi_cls(True)], [slice_of(device(D1, capacity={CAP0: "2"}, multiple=True))])
    assert result == [one(dev("req-0", D1, shared=True, consumed={CAP0: "1"}))] * 2


def test_consumable_capacity_with_policy_without_capacity_request() -> None:
    """Both claims consume the policy's default (2 of 4)."""
    result = allocate([claim("claim-0", request("req-0", CLASS_A, 1)), claim("claim-1", request("req-0", CLASS_A, 1))],
                      [multi_cls(True)], [slice_of(device(D1, capacity={CAP0: in_range("4")}, multiple=True))])
    assert result == [one(dev("req-0", D1, shared=True, consumed={CAP0: "2"}))] * 2


def test_consumable_capacity_zero_request_policy() -> None:
    slices = [slice_of(device(D1, capacity={CAP0: valid_values("0", "1")}, multiple=True))]
    result = allocate([claim("claim-0", request("req-0", CLASS_A, 1)), claim("claim-1", request("req-0", CLASS_A, 1))],
                      [multi_cls(True)], slices)
    assert result == [one(dev("req-0", D1, shared=True, consumed={CAP0: "0"}))] * 2
    # ...-violates-zero-request-policy: 1 is no valid value
    assert allocate([claim("claim-0", request("req-0", CLASS_A, 1, capacity=cap("1")))], [multi_cls(True)],
                    slices) is None


def test_consumable_capacity_range_policy() -> None:
    device_of_4 = [slice_of(device(D1, capacity={CAP0: in_range("4")}, multiple=True))]
    # ...-with-range-policy-with-capacity-request: 1 is rounded up to the minimum, 2
    result = allocate([claim("claim-0", request("req-0", CLASS_A, 1, capacity=cap("1"))),
                       claim("claim-1", request("req-0", CLASS_A, 1, capacity=cap("1")))],
                      [multi_cls(True)], device_of_4)
    assert result == [one(dev("req-0", D1, shared=True, consumed={CAP0: "2"}))] * 2
    # ...-with-range-policy-step: 3 is rounded up to the next step, 4
    assert allocate([claim("claim-0", request("req-0", CLASS_A, 1, capacity=cap("3")))], [multi_cls(True)],
                    device_of_4) == [one(dev("req-0", D1, shared=True, consumed={CAP0: "4"}))]
    # ...-with-exceeded-consumable-capacity-request: 2 + 2 over a capacity of 2
    assert allocate([claim("claim-0", request("req-0", CLASS_A, 1, capacity=cap("1"))),
                     claim("claim-1", request("req-0", CLASS_A, 1, capacity=cap("2")))], [multi_cls(True)],
                    [slice_of(device(D1, capacity={CAP0: in_range("2")}, multiple=True))]) is None
    # ...-with-request-over-max-sharing-policy: 6 is below the capacity (10) but above the range's max (4)
    assert allocate([claim("claim-0", request("req-0", CLASS_A, 1, capacity=cap("6")))], [multi_cls(True)],
                    [slice_of(device(D1, capacity={CAP0: in_range("10")}, multiple=True))]) is None


def test_consumable_capacity_valid_values_policy() -> None:
    assert allocate([claim("claim-0", request("req-0", CLASS_A, 1, capacity=cap("2")))], [multi_cls(True)],
                    [slice_of(device(D1, capacity={CAP0: valid_values("1", "4", "2")}, multiple=True))]) == [
        one(dev("req-0", D1, shared=True, consumed={CAP0: "2"}))]
    # ...-round-up: 2 is rounded up to the next valid value, 3
    assert allocate([claim("claim-0", request("req-0", CLASS_A, 1, capacity=cap("2")))], [multi_cls(True)],
                    [slice_of(device(D1, capacity={CAP0: valid_values("1", "3", "3")}, multiple=True))]) == [
        one(dev("req-0", D1, shared=True, consumed={CAP0: "3"}))]


def _taken(device_name: str, amount: str) -> AllocatedState:
    """Other claims' shares of a device consume `amount` of capacity-0 (kube's allocatedCapacityDevices)."""
    device_id = (DRIVER_A, POOL1, device_name)
    return AllocatedState(shared={device_id}, capacity={device_id: {CAP0: Fraction(amount)}})


def test_consumable_capacity_with_allocated_capacity() -> None:
    # ...-use-remaining: 2 of 4 taken, 2 left
    assert allocate([claim("claim-0", request("req-0", CLASS_A, 1, capacity=cap("2")))], [multi_cls(True)],
                    [slice_of(device(D1, capacity={CAP0: in_range("4")}, multiple=True))], _taken(D1, "2")) == [
        one(dev("req-0", D1, shared=True, consumed={CAP0: "2"}))]
    # ...-next-device: device-1 is full
    two_devices = [slice_of(device(D1, capacity={CAP0: in_range("2")}, multiple=True),
                            device(D2, capacity={CAP0: in_range("2")}, multiple=True))]
    assert allocate([claim("claim-0", request("req-0", CLASS_A, 1, capacity=cap("2")))], [multi_cls(True)],
                    two_devices, _taken(D1, "2")) == [one(dev("req-0", D2, shared=True, consumed={CAP0: "2"}))]
    # ...-with-no-available-consumable-capacity
    assert allocate([claim("claim-0", request("req-0", CLASS_A, 1, capacity=cap("2")))], [multi_cls(True)],
                    two_devices[:1] and [slice_of(device(D1, capacity={CAP0: in_range("2")}, multiple=True))],
                    _taken(D1, "2")) is None


def test_consumable_capacity_with_multi_allocatable_device_backtrack() -> None:
    """claim-0's two requests must share one device (matchAttribute): only device-1 (capacity 4) has
    room for both; claim-1 then takes device-2."""
    slices = [slice_of(
        device(D2, {"stringAttribute": "stringAttributeValue1"}, capacity={CAP0: in_range("2")}, multiple=True),
        device(D1, {"stringAttribute": "stringAttributeValue2"}, capacity={CAP0: in_range("4")}, multiple=True),
    )]
    result = allocate([claim("claim-0", request("req-0", CLASS_A, 1, capacity=cap("2")),
                             request("req-1", CLASS_A, 1, capacity=cap("2")),
                             constraints=[{"matchAttribute": f"{DRIVER_A}/stringAttribute"}]),
                       claim("claim-1", request("req-0", CLASS_A, 1, capacity=cap("2")))], [cls()], slices)
    assert result == [one(dev("req-0", D1, shared=True, consumed={CAP0: "2"}),
                          dev("req-1", D1, shared=True, consumed={CAP0: "2"})),
                      one(dev("req-0", D2, shared=True, consumed={CAP0: "2"}))]


def test_consumable_capacity_with_subrequest() -> None:
    """The first alternative asks for more than the device has; the second fits."""
    result = allocate([claim("claim-0", first_available(
        "req-0", sub_request("subReq-0", CLASS_A, 1, capacity=cap("4")),
        sub_request("subReq-1", CLASS_A, 1, capacity=cap("2")), sub_request("subReq-1", CLASS_A, 1)))],
        [multi_cls(True)], [slice_of(device(D1, capacity={CAP0: in_range("2")}, multiple=True))])
    assert result == [one(dev("req-0/subReq-1", D1, shared=True, consumed={CAP0: "2"}))]


def test_consumable_capacity_allocation_mode_all_filters_devices() -> None:
    """allocation-mode-all-filter-out-no-capacity / -insufficient-capacity: `All` takes only the
    devices with room for the request."""
    for other in (device(D2, multiple=True), device(D2, capacity={CAP0: "1"}, multiple=True)):
        result = allocate([claim("claim-0", request("req-0", CLASS_A, mode="All", capacity=cap("2")))],
                          [multi_cls(True)], [slice_of(device(D1, capacity={CAP0: "2"}, multiple=True), other)])
        assert result == [one(dev("req-0", D1, shared=True, consumed={CAP0: "2"}))]


def test_consumable_capacity_allocation_mode_all_with_shares() -> None:
    big, small = device(D1, capacity={CAP0: "2"}, multiple=True), device(D2, capacity={CAP0: "1"}, multiple=True)
    one_each = claim("claim-0", request("req-0", CLASS_A, 1, capacity=cap("1")),
                     request("req-1", CLASS_A, mode="All", capacity=cap("1")))
    # ...-allocating-sufficient: req-0's share of device-1 leaves room for req-1's
    assert allocate([one_each], [cls()], [slice_of(big, small)]) == [one(
        dev("req-0", D1, shared=True, consumed={CAP0: "1"}), dev("req-1", D1, shared=True, consumed={CAP0: "1"}),
        dev("req-1", D2, shared=True, consumed={CAP0: "1"}))]
    # ...-allocating-insufficient: no room for both anywhere
    small1 = device(D1, capacity={CAP0: "1"}, multiple=True)
    assert allocate([one_each], [cls()], [slice_of(small1, small)]) is None
    only_all = claim("claim-0", request("req-0", CLASS_A, mode="All", capacity=cap("1")))
    # ...-in-use-sufficient: another claim's share of device-1 leaves room
    assert allocate([only_all], [cls()], [slice_of(big, small)], _taken(D1, "1")) == [one(
        dev("req-0", D1, shared=True, consumed={CAP0: "1"}), dev("req-0", D2, shared=True, consumed={CAP0: "1"}))]
    # ...-in-use-insufficient: device-1 is full, `All` is the devices with room
    assert allocate([only_all], [cls()], [slice_of(small1, small)], _taken(D1, "1")) == [
        one(dev("req-0", D2, shared=True, consumed={CAP0: "1"}))]


def test_consumable_capacity_dedicated_device() -> None:
    """A device without allowMultipleAllocations is held whole, its capacity checked, no share."""
    assert allocate([claim("claim-0", request("req-0", CLASS_A, 1, capacity=cap("1")))], [multi_cls(False)],
                    [slice_of(device(D1, capacity={CAP0: "1"}))]) == [one(dev("req-0", D1))]
    # ...-with-multiple-consumable-capacity-request: the second claim finds it taken
    assert allocate([claim("claim-0", request("req-0", CLASS_A, 1, capacity=cap("1"))),
                     claim("claim-1", request("req-0", CLASS_A, 1, capacity=cap("1")))], [multi_cls(False)],
                    [slice_of(device(D1, capacity={CAP0: in_range("2")}))]) is None


def test_allow_multiple_allocations() -> None:
    # ...-exclude-multi-allocatable-device-by-class-selector
    assert allocate([claim("claim-0", request("req-0", CLASS_A, 1, capacity=cap("1")))], [multi_cls(False)],
                    [slice_of(device(D1, capacity={CAP0: "1"}, multiple=True))]) is None
    # ...-not-allocate-multi-allocatable-device-which-already-dedicated
    assert allocate([claim("claim-0", request("req-0", CLASS_A, 1, capacity=cap("1")))], [multi_cls(True)],
                    [slice_of(device(D1, capacity={CAP0: in_range("2")}, multiple=True))],
                    AllocatedState({(DRIVER_A, POOL1, D1)})) is None
    # ...-not-allocate-dedicated-device-which-change-from-multi-allocatable: shares of it are allocated
    assert allocate([claim("claim-0", request("req-0", CLASS_A, 1, capacity=cap("1")))], [multi_cls(True)],
                    [slice_of(device(D1, capacity={CAP0: in_range("2")}))], _taken(D1, "1")) is None


def _partition(name: str, memory: str) -> dict[str, Any]:
    return _drawing(name, memory, multiple=True)


def test_allow_multiple_allocations_with_partitionable_device() -> None:
    """device-1 (4Gi of the set's 8Gi) is shared; req-1 wants 6Gi (device-2: the counters do not
    last) or 4Gi: device-1 has no capacity left, device-3 fits."""
    slices = [slice_of(_partition(D1, "4Gi"), _partition(D2, "6Gi"), _partition(D3, "4Gi"), count=2), _counters()]
    memory = f'device.capacity["{DRIVER_A}"].memory.compareTo(quantity("{{}}")) >= 0'
    result = allocate([claim("claim-0", request("req-0", CLASS_A, 1), first_available(
        "req-1", sub_request("subReq-0", CLASS_A, 1, memory.format("6Gi")),
        sub_request("subReq-1", CLASS_A, 1, memory.format("4Gi"))))], [multi_cls(True)], slices)
    assert result == [one(dev("req-0", D1, shared=True, consumed={"memory": "4Gi"}),
                          dev("req-1/subReq-1", D3, shared=True, consumed={"memory": "4Gi"}))]


def test_allow_multiple_allocations_with_shared_device_counter_cross_cycle() -> None:
    """device-1 has a share allocated in another cycle: its counters are taken, device-2 cannot draw."""
    slices = [slice_of(
        device(D1, {"mode": "a"}, capacity={CAP0: "1"}, consumes=[("counter-set-1", {CAP0: "1"})], multiple=True),
        device(D2, {"mode": "b"}, capacity={CAP0: "1"}, consumes=[("counter-set-1", {CAP0: "1"})], multiple=True),
        count=2), resource_slice("slice-2", DRIVER_A, node=NODE1, pool=POOL1, count=2,
                                 counters={"counter-set-1": {CAP0: "1"}})]
    mode_b = f'device.attributes["{DRIVER_A}"].mode == "b"'
    assert allocate([claim("claim-0", request("req-0", CLASS_A, 1, mode_b, capacity=cap("1")))], [multi_cls(True)],
                    slices, _taken(D1, "1")) is None


def test_consumable_capacity_with_partitionable_device_multiple_capacity_pools() -> None:
    """kube's comments: req-0 takes device-1 (1 of capacity-0, capacity-1 by the policy's default 2);
    req-2 (2) finds device-1 short and device-2 beyond the counters: device-3; req-1's first
    alternative needs device-2 (no), its second takes what is left of device-1."""
    def partition(name: str, cap0: str) -> dict[str, Any]:
        return device(name, capacity={CAP0: cap0, CAP1: in_range("4")}, multiple=True,
                      consumes=[("counter-set-1", {CAP0: cap0}), ("counter-set-2", {CAP1: "4"})])

    slices = [slice_of(partition(D1, "2"), partition(D2, "4"), partition(D3, "2"), count=2),
              resource_slice("slice-2", DRIVER_A, node=NODE1, pool=POOL1, count=2,
                             counters={"counter-set-1": {CAP0: "4"}, "counter-set-2": {CAP1: "8"}})]
    at_least = f'device.capacity["{DRIVER_A}"]["{CAP0}"].compareTo(quantity("{{}}")) >= 0'
    result = allocate([claim("claim-0", request("req-0", CLASS_A, 1, capacity=cap("1")),
                             request("req-2", CLASS_A, 1, capacity=cap("2")),
                             first_available("req-1", sub_request("subReq-0", CLASS_A, 1, at_least.format("4"),
                                                                  capacity=cap("1")),
                                             sub_request("subReq-1", CLASS_A, 1, at_least.format("2"),
                                                         capacity=cap("1"))))], [cls()], slices)
    assert result == [one(dev("req-0", D1, shared=True, consumed={CAP0: "1", CAP1: "2"}),
                          dev("req-2", D3, shared=True, consumed={CAP0: "2", CAP1: "2"}),
                          dev("req-1/subReq-1", D1, shared=True, consumed={CAP0: "1", CAP1: "2"}))]


# ---------------------------------------------------------------------------- distinctAttribute


def _distinct(attribute: str, *requests: str) -> dict[str, Any]:
    out: dict[str, Any] = {"distinctAttribute": f"{DRIVER_A}/{attribute}"}
    if requests:
        out["requests"] = list(requests)
    return out


def test_with_distinct_constraints() -> None:
    attrs = [("1.0.0", 0, True), ("1.0.1", 1, False), ("1.0.2", 2, True), ("1.0.0", 3, True)]
    slices = [slice_of(*(device(name, {"driverVersion": {"version": v}, "numa": n, "boolAttribute": b}, multiple=True)
                         for name, (v, n, b) in zip((D1, D2, D3, D4), attrs, strict=True)))]
    constraints = [_distinct("boolAttribute", "req-0", "req-1"), _distinct("driverVersion", "req-0", "req-1", "req-2"),
                   _distinct("numa", "req-0", "req-1", "req-2", "req-3")]
    result = allocate([claim("claim-0", *(request(f"req-{i}", CLASS_A, 1) for i in range(4)),
                             constraints=constraints)], [cls()], slices)
    assert result == [one(dev("req-0", D1, shared=True), dev("req-1", D2, shared=True),
                          dev("req-2", D3, shared=True), dev("req-3", D4, shared=True))]


def test_with_distinct_constraints_attribute_not_set_or_unknown() -> None:
    single = [claim("claim-0", request("req-0", CLASS_A, 1), constraints=[_distinct("boolAttribute", "req-0")])]
    assert allocate(single, [cls()], [slice_of(device(D1, multiple=True))]) is None
    # ...-unknown-type-attribute: an attribute without a value is an error for CEL
    with pytest.raises(AllocationError, match="unsupported attribute value"):
        allocate(single, [cls()], [slice_of(device(D1, {"boolAttribute": {}}, multiple=True))])


def test_with_distinct_constraints_with_subrequests() -> None:
    """The constraint covers req-0 and req-1: req-1 cannot take another `true` device and falls back
    to device-2; req-2 is free to share device-1 again."""
    flag = f'device.attributes["{DRIVER_A}"].boolAttribute'
    requests = [first_available(f"req-{i}", sub_request("subReq-0", CLASS_A, 1, flag),
                                sub_request("subReq-1", CLASS_A, 1)) for i in range(3)]
    slices = [slice_of(device(D1, {"boolAttribute": True}, multiple=True),
                       device(D2, {"boolAttribute": False}, multiple=True))]
    result = allocate([claim("claim-0", *requests, constraints=[_distinct("boolAttribute", "req-0", "req-1")])],
                      [cls()], slices)
    assert result == [one(dev("req-0/subReq-0", D1, shared=True), dev("req-1/subReq-1", D2, shared=True),
                          dev("req-2/subReq-0", D1, shared=True))]


def test_distinct_constraint_multi_allocatable_devices() -> None:
    two_requests = claim("claim-0", request("req-0", CLASS_A, 1, capacity=cap("1")),
                         request("req-1", CLASS_A, 1, capacity=cap("1")),
                         constraints=[{"distinctAttribute": f"{DRIVER_A}/stringAttribute"}])
    # distinct-constraint-one-multi-allocatable-device: both shares of one device have one value
    assert allocate([two_requests], [multi_cls(True)], [slice_of(
        device(D1, {"stringAttribute": "stringAttributeValue"}, capacity={CAP0: in_range("2")},
               multiple=True))]) is None
    # distinct-constraint-two-multi-allocatable-devices
    slices = [slice_of(device(D1, {"stringAttribute": "stringAttributeValue1"}, capacity={CAP0: in_range("4")},
                              multiple=True), count=2),
              slice_of(device(D2, {"stringAttribute": "stringAttributeValue2"}, capacity={CAP0: in_range("4")},
                              multiple=True), count=2)]
    two_of_two = claim("claim-0", request("req-0", CLASS_A, 1, capacity=cap("2")),
                       request("req-1", CLASS_A, 1, capacity=cap("2")),
                       constraints=[{"distinctAttribute": f"{DRIVER_A}/stringAttribute"}])
    assert allocate([two_of_two], [multi_cls(True)], slices) == [one(
        dev("req-0", D1, shared=True, consumed={CAP0: "2"}), dev("req-1", D2, shared=True, consumed={CAP0: "2"}))]


def test_one_request_never_takes_a_shared_device_twice() -> None:
    """Within one request devices are combinations in pool order: `count: 2` over one shared device
    does not fit, however much capacity it has (kube's startLocation)."""
    slices = [slice_of(device(D1, capacity={CAP0: "10"}, multiple=True))]
    assert allocate([claim("claim-0", request("req-0", CLASS_A, 2, capacity=cap("1")))], [cls()], slices) is None
    # two requests may share it, each with its own share
    result = allocate([claim("claim-0", request("req-0", CLASS_A, 1, capacity=cap("1")),
                             request("req-1", CLASS_A, 1, capacity=cap("1")))], [cls()], slices)
    assert result == [one(dev("req-0", D1, shared=True, consumed={CAP0: "1"}),
                          dev("req-1", D1, shared=True, consumed={CAP0: "1"}))]


# ---------------------------------------------------------------------------- combinations


FOUR = [device(D1), device(D2), device(D3), device(D4)]


@pytest.mark.parametrize("slices", [
    pytest.param([slice_of(*FOUR)], id="check-combinations-within-single-request-single-pool-single-slice"),
    pytest.param([slice_of(*FOUR[:2], count=2), slice_of(*FOUR[2:], name="slice-2", count=2)],
                 id="check-combinations-within-single-request-single-pool-multiple-slices"),
    pytest.param([slice_of(FOUR[0], count=2), slice_of(FOUR[1], name="slice-2", count=2),
                  slice_of(*FOUR[2:], name="slice-3", pool=POOL2)],
                 id="check-combinations-within-single-request-multiple-pools-multiple-slices"),
    pytest.param([slice_of(d, name=f"slice-{i}", pool=f"pool-{i}") for i, d in enumerate(FOUR, 1)],
                 id="check-combinations-within-single-request-many-pools"),
])
def test_check_combinations_within_single_request(slices: list[dict[str, Any]]) -> None:
    """Five devices asked of four: 16 search steps (the stable allocator's permutations took 65)."""
    assert allocate([claim("claim-0", request("req-0", CLASS_A, 5))], [cls()], slices, steps=16) is None


def _typed(name: str, kind: str, **kwargs: Any) -> dict[str, Any]:
    return device(name, {"type": kind}, **kwargs)


def test_check_combinations_with_backtracking() -> None:
    x = f'device.attributes["{DRIVER_A}"].type == "X"'
    requests = [request("req-1", CLASS_A, 2), request("req-2", CLASS_A, 1, x)]
    slices = [slice_of(_typed(D1, "X"), _typed(D2, "Y"), _typed(D3, "Y"))]
    assert allocate([claim("claim-0", *requests)], [cls()], slices, steps=12) == [
        one(dev("req-1", D2), dev("req-1", D3), dev("req-2", D1))]
    # ...-across-slices-and-pools: pool-2 (a device with binding conditions) is searched last
    slices = [slice_of(_typed(D1, "X"), count=2), slice_of(_typed(D2, "Y"), name="slice-2", count=2),
              slice_of(_typed(D3, "Y", binding_conditions=["IsPrepare"]), name="slice-3", pool=POOL2)]
    assert allocate([claim("claim-0", *requests)], [cls()], slices, steps=12) == [
        one(dev("req-1", D2), dev("req-1", D3, pool=POOL2, conditions=["IsPrepare"]), dev("req-2", D1))]


def test_check_combinations_with_prioritized_list() -> None:
    y = f'device.attributes["{DRIVER_A}"].type == "Y"'
    x = f'device.attributes["{DRIVER_A}"].type == "X"'
    requests = [first_available("req-1", sub_request("subReq-0", CLASS_A, 3, y), sub_request("subReq-1", CLASS_A, 2)),
                first_available("req-2", sub_request("subReq-0", CLASS_A, 2), sub_request("subReq-1", CLASS_A, 1, x))]
    slices = [slice_of(_typed(D1, "X"), _typed(D2, "Y"), _typed(D3, "Y"))]
    assert allocate([claim("claim-0", *requests)], [cls()], slices, steps=26) == [
        one(dev("req-1/subReq-1", D2), dev("req-1/subReq-1", D3), dev("req-2/subReq-1", D1))]


def test_prioritized_list_max_allocation_steps() -> None:
    """prioritized-list-max-allocation-limit-request (75 steps) and -allocation-mode-all (42)."""
    alternatives = [sub_request("subReq-0", CLASS_A, 32), sub_request("subReq-1", CLASS_A, 16)]
    many = [slice_of(*(device(f"device-{i}") for i in range(64)))]
    result = allocate([claim("claim-0", first_available("req-0", *alternatives),
                             first_available("req-1", *alternatives))], [cls()], many, steps=75)
    assert result is not None
    ((_, devices),) = result
    assert [d[2] for d in devices if d[0] == "req-0/subReq-1"] == sorted(f"device-{i}" for i in range(16))
    driver_b = resource_slice("slice-2", "driver-b", node=NODE1, pool=POOL2,
                              devices=[device("device-0"), device("device-1")])
    result = allocate([claim("claim-0", first_available("req-0", sub_request("subReq-0", CLASS_A, 0, mode="All"),
                                                        sub_request("subReq-1", CLASS_A, 2)),
                             request("req-1", CLASS_B, 2))],
                      [cls(), cls(CLASS_B, "driver-b")],
                      [slice_of(*(device(f"device-{i}") for i in range(31))), driver_b], steps=42)
    assert result == [one(dev("req-0/subReq-1", "device-0"), dev("req-0/subReq-1", "device-1"),
                          dev("req-1", "device-0", pool=POOL2), dev("req-1", "device-1", pool=POOL2))]


# ---------------------------------------------------------------------------- consumable_capacity_test.go


def _q(text: str) -> Any:
    return parse_quantity_with_format(text)


def _policy(default: str | None = None, values: Sequence[str] | None = None, low: str | None = None,
            high: str | None = None, step: str | None = None) -> CapacityPolicy:
    bounds = None if low is None and high is None and step is None else CapacityRange(
        *(None if v is None else _q(v) for v in (low, high, step)))
    return CapacityPolicy(None if default is None else _q(default),
                          None if values is None else tuple(_q(v) for v in values), bounds)


@pytest.mark.parametrize(("requested", "value", "policy", "expected"), [
    (None, "1", _policy(), "1"),  # empty
    (None, "2", _policy("1", low="1"), "1"),  # min in range
    (None, "2", _policy("1", ["1"]), "1"),  # default in set
    ("2", "2", _policy("1", low="1"), "2"),  # more than min in range
    ("1", "2", _policy("1", low="2"), "2"),  # less than min in range
    ("2", "3", _policy("1", low="1", step="2"), "3"),  # with step (round up)
    ("2", "2", _policy("1", low="1", step="1"), "2"),  # with step (no remaining)
    ("2", "3", _policy("1", ["1", "2", "3"]), "2"),  # valid value in set
    ("2", "3", _policy("1", ["1", "3"]), "3"),  # set (round up)
    ("3", "3", _policy("1", ["1", "2"]), "3"),  # larger than set
], ids=["empty", "min-in-range", "default-in-set", "more-than-min-in-range", "less-than-min-in-range",
        "with-step-round-up", "with-step-no-remaining", "valid-value-in-set", "set-round-up", "larger-than-set"])
def test_calculate_consumed_capacity(requested: str | None, value: str, policy: CapacityPolicy, expected: str) -> None:
    consumed = consumed_capacity(None if requested is None else _q(requested), DeviceCapacity(_q(value), policy))
    assert consumed.value == _q(expected).value


@pytest.mark.parametrize(("requested", "policy", "violates"), [
    ("1", None, False),
    ("1", _policy("1", low="1", high="2"), False),
    ("2", _policy("1", low="1", high="1"), True),
    ("1", _policy("1", ["1"]), False),
    ("2", _policy("1", ["1"]), True),
], ids=["no-constraint", "less-than-maximum", "more-than-maximum", "in-set", "not-in-set"])
def test_violate_capacity_request_policy(requested: str, policy: CapacityPolicy | None, violates: bool) -> None:
    """kube's violatesPolicy, seen through the search: a share that violates its policy never fits."""
    shared = Device("d", capacities={CAP0: DeviceCapacity(_q("10"), policy)}, allow_multiple_allocations=True)
    assert request_fits({CAP0: _q(requested)}, shared, None) is not violates


def test_get_consumed_capacity_from_request() -> None:
    """Each of the device's capacities: the request (capacity-0), the default (capacity-1), the value
    (dummy, no policy)."""
    capacities = {CAP0: DeviceCapacity(_q("2"), _policy("2", low="1")),
                  CAP1: DeviceCapacity(_q("2"), _policy("1", low="1")), "dummy": DeviceCapacity(_q("1"))}
    requests = {CAP0: _q("1"), "dummy": _q("1")}
    assert {name: consumed_capacity(requests.get(name), c).value for name, c in capacities.items()} == {
        CAP0: 1, CAP1: 1, "dummy": 1}


def test_a_share_is_written_in_its_quantity_format() -> None:
    """What kube writes as consumedCapacity: the request as given (`40Gi`), a value rounded by a
    step as a BinarySI quantity, a default or valid value as written in the slice."""
    slices = [slice_of(device(D1, capacity={"memory": capacity_policy("80Gi", default="8Gi", minimum="1Gi",
                                                                      step="4Gi")}, multiple=True))]
    def share(amount: str | None) -> Any:
        requested = None if amount is None else {"memory": amount}
        result = allocate([claim("claim-0", request("req-0", CLASS_A, 1, capacity=requested))], [cls()], slices)
        assert result is not None
        return dict(result[0][1][0][4] or ())
    assert share("40Gi") == {"memory": "41Gi"}  # 1Gi + 10 steps of 4Gi
    assert share("9Gi") == {"memory": "9Gi"}
    assert share(None) == {"memory": "8Gi"}
    assert share("1.5Gi") == {"memory": "5Gi"}
