"""DRA's objects (`placer.engine.devices`, `pod_claims`) and CEL (`placer.engine.dra_cel`): parsing
with the API server's defaults and clear errors, and kube's CEL environment for device selectors."""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Any

import pytest
from placer.engine.catalog import Catalog
from placer.engine.devices import parse_device_class, parse_resource_claim, parse_resource_slice
from placer.engine.dra_cel import CelError, compile_selector, device_variable, evaluate, parse_semver, semver_value
from placer.engine.objects import ObjectError
from placer.engine.parsing import parse_pod
from placer.testing_devices import capacity_policy, claim_pod, device, request, resource_claim, resource_slice

DRIVER = "gpu.example.com"
GPU = device_variable(
    DRIVER,
    {"model": "a100", "numa": 1, "other.io/x": True, "driverVersion": semver_value(parse_semver("1.2.3"))},
    {"memory": Fraction(40 * 2**30)},
)


@pytest.mark.parametrize(("expression", "expected"), [
    (f'device.driver == "{DRIVER}"', True),
    (f'device.attributes["{DRIVER}"].model == "a100" && device.attributes["{DRIVER}"].numa == 1', True),
    ('device.attributes["other.io"].x', True),
    (f'"{DRIVER}" in device.attributes && !("nope.io" in device.attributes)', True),
    ('has(device.attributes["nope.io"].x)', False),
    (f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) == 0', True),
    (f'device.capacity["{DRIVER}"].memory.isGreaterThan(quantity("32Gi"))', True),
    (f'device.capacity["{DRIVER}"].memory.isLessThan(quantity("32Gi"))', False),
    (f'device.capacity["{DRIVER}"].memory == quantity("40960Mi")', True),
    (f'device.capacity["{DRIVER}"].memory.add(quantity("8Gi")).compareTo(quantity("48Gi")) == 0', True),
    (f'device.capacity["{DRIVER}"].memory.asInteger() == {40 * 2**30}', True),
    ('quantity("1.5").isInteger() || quantity("1.5").sign() != 1', False),
    (f'device.attributes["{DRIVER}"].driverVersion.isGreaterThan(semver("1.2.3-rc.1"))', True),
    (f'device.attributes["{DRIVER}"].driverVersion.compareTo(semver("1.10.0")) < 0', True),
    (f'device.attributes["{DRIVER}"].driverVersion.minor() == 2', True),
    ('isSemver("1.0") || !isQuantity("1Gi")', False),
    (f'cel.bind(dra, device.attributes["{DRIVER}"], dra.model == "a100" && dra.numa == 1)', True),
    (f'device.attributes["{DRIVER}"].model.upperAscii().startsWith("A1")', True),
])
def test_selectors(expression: str, expected: bool) -> None:
    assert evaluate(compile_selector(expression), GPU) is expected


@pytest.mark.parametrize(("expression", "message"), [
    ('device.attributes["nope.io"].model == "a"', "no such key: model"),  # an unknown domain is an empty map
    (f'device.attributes["{DRIVER}"].missing == "a"', "no such key: missing"),
    (f'device.attributes["{DRIVER}"].model > 1', "no such overload"),
    (f'device.attributes["{DRIVER}"].model', "CEL result of type string could not be converted to bool"),
    ("noSuchVar", "undeclared reference to 'noSuchVar'"),
])
def test_runtime_errors(expression: str, message: str) -> None:
    with pytest.raises(CelError, match=message):
        evaluate(compile_selector(expression), GPU)


def test_compile_once_and_compile_errors() -> None:
    assert compile_selector("device.driver == 'x'") is compile_selector("device.driver == 'x'")
    broken = compile_selector("device.driver ==")
    assert broken.program is None and broken.error is not None and broken.error.startswith("compilation failed")


def test_semver_precedence() -> None:
    order = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11",
             "1.0.0-rc.1", "1.0.0"]
    versions = [parse_semver(v) for v in order]
    assert all(a.compare(b) == -1 for a, b in itertools.pairwise(versions))
    with pytest.raises(ValueError):
        parse_semver("01.0.0")


def test_claim_defaults() -> None:
    claim = parse_resource_claim(resource_claim("c", requests=[{"name": "r", "exactly": {"deviceClassName": "g"}}]))
    (req,) = claim.requests
    assert req.exactly is not None and (req.exactly.mode, req.exactly.count) == ("ExactCount", 1)
    assert claim.key == "default/c" and claim.allocation is None and not claim.pending


@pytest.mark.parametrize(("kind", "raw", "path"), [
    ("slice", {"metadata": {"name": "s"}, "spec": {"pool": {"name": "p"}}}, "spec.driver"),
    ("slice", resource_slice("s", DRIVER, node="n", devices=[{"name": "d", "capacity": {"m": {"value": "x"}}}]),
     "spec.devices[0].capacity[m].value"),
    ("slice", resource_slice("s", DRIVER, per_device=True, devices=[device("d")]), "spec.devices[0]"),
    ("slice", resource_slice("s", DRIVER, node="n", devices=[{"name": "d", "taints": [{"key": "k"}]}]),
     "spec.devices[0].taints[0].effect"),
    ("claim", resource_claim("c", requests=[request("r", "g", 0)]), "spec.devices.requests[0].exactly.count"),
    ("claim", resource_claim("c", requests=[{"exactly": {}}]), "spec.devices.requests[0].name"),
    ("claim", resource_claim("c", requests=[request("r", "g", tolerations=[{"operator": "Maybe"}])]),
     "spec.devices.requests[0].exactly.tolerations[0].operator"),
    ("class", {"metadata": {"name": "g"}, "spec": {"selectors": [{"cel": {}}]}}, "spec.selectors[0].cel.expression"),
    ("class", {"metadata": {}}, "metadata.name"),
    ("slice", resource_slice("s", DRIVER, node="n", devices=[device("d", capacity={
        "m": capacity_policy("4", minimum="1", step="0")})]),
     "spec.devices[0].capacity[m].requestPolicy.validRange.step"),
    ("slice", resource_slice("s", DRIVER, node="n", devices=[device("d", capacity={
        "m": capacity_policy("4", valid_values=["1", "x"])})]),
     "spec.devices[0].capacity[m].requestPolicy.validValues[1]"),
    ("claim", resource_claim("c", requests=[request("r", "g", capacity={"m": "lots"})]),
     "spec.devices.requests[0].exactly.capacity.requests[m]"),
    ("claim", resource_claim("c", requests=[request("r", "g")], allocated={"devices": {"results": [
        {"request": "r", "driver": DRIVER, "pool": "p", "device": "d", "consumedCapacity": {"m": []}}]}}),
     "status.allocation.devices.results[0].consumedCapacity[m]"),
    ("claim", {**resource_claim("c", requests=[request("r", "g")]), "status": {"devices": [{"driver": DRIVER}]}},
     "status.devices[0].pool"),
])
def test_malformed_objects(kind: str, raw: dict[str, Any], path: str) -> None:
    parse = {"slice": parse_resource_slice, "claim": parse_resource_claim, "class": parse_device_class}[kind]
    with pytest.raises(ObjectError) as error:
        parse(raw)
    assert error.value.path == path


def test_consumable_capacity_and_binding_conditions_fields() -> None:
    """What DRAConsumableCapacity and DRADeviceBindingConditions add: a device's request policy,
    sharing and binding fields; a request's capacity; a share and the conditions in an allocation;
    the allocation's timestamp; the driver's `status.devices` conditions."""
    (shared,) = parse_resource_slice(resource_slice("s", DRIVER, node="n", devices=[device(
        "gpu", capacity={"memory": capacity_policy("80Gi", default="8Gi", minimum="4Gi", maximum="40Gi", step="4Gi"),
                         "links": "2"},
        multiple=True, binding_conditions=["Attached"], binding_failure_conditions=["Failed"], binds_to_node=True,
    )])).devices
    assert shared.allow_multiple_allocations and shared.binds_to_node
    assert (shared.binding_conditions, shared.binding_failure_conditions) == (("Attached",), ("Failed",))
    memory = shared.capacities["memory"]
    assert str(memory.value) == "80Gi" and memory.policy is not None and memory.policy.valid_range is not None
    assert str(memory.policy.default) == "8Gi" and str(memory.policy.valid_range.step) == "4Gi"
    assert shared.capacities["links"].policy is None and shared.capacity["memory"] == 80 * 2**30
    assert shared.cel["allowMultipleAllocations"] is True
    claim = parse_resource_claim({**resource_claim(
        "c", requests=[request("r", "g", capacity={"memory": "12Gi"})],
        allocated={"devices": {"results": [{
            "request": "r", "driver": DRIVER, "pool": "p", "device": "gpu",
            "shareID": "1b4e28ba-2fa1-11d2-883f-b9a761bde3fb",
            "consumedCapacity": {"memory": "12Gi"}, "bindingConditions": ["Attached"],
            "bindingFailureConditions": ["Failed"]}]}, "allocationTimestamp": "2027-01-15T08:00:00Z"}),
    })
    (req,) = claim.requests
    assert req.exactly is not None and {k: str(v) for k, v in req.exactly.capacity.items()} == {"memory": "12Gi"}
    assert claim.allocation is not None and claim.allocation.timestamp == 1_800_000_000
    (result,) = claim.allocation.results
    assert result.share_id == "1b4e28ba-2fa1-11d2-883f-b9a761bde3fb" and result.binding_conditions == ("Attached",)
    assert {k: str(v) for k, v in (result.consumed_capacity or {}).items()} == {"memory": "12Gi"}
    raw = resource_claim("c", requests=[request("r", "g")])
    raw["status"]["devices"] = [{"driver": DRIVER, "pool": "p", "device": "gpu", "conditions": [
        {"type": "Attached", "status": "False", "reason": "Waiting", "message": "fabric",
         "lastTransitionTime": "2027-01-15T08:00:00Z"}]}]
    (status,) = parse_resource_claim(raw).devices
    condition = status.condition("Attached")
    assert condition is not None and (condition.status, condition.reason, condition.message) == (
        "False", "Waiting", "fabric")
    assert status.condition("Failed") is None


def test_pod_claims() -> None:
    pod = parse_pod(claim_pod("p", claims={"a": "claim-a"}, templates={"b": "tpl"}, generated={"b": "p-b-x"}))
    assert [(c.name, c.claim_name, c.template_name, c.recorded, c.generated) for c in pod.resource_claims] == [
        ("a", "claim-a", None, False, None), ("b", None, "tpl", True, "p-b-x")]
    broken = claim_pod("q")
    broken["spec"]["resourceClaims"] = [{"resourceClaimName": "x"}]
    assert parse_pod(broken).error == "invalid pod default/q: spec.resourceClaims[0].name: Required value"


def test_catalog_observers_see_what_is_shown() -> None:
    """Assumptions and their restoring reach observers as changes of the shown object."""
    catalog = Catalog()
    seen: list[tuple[Any, Any]] = []
    catalog.observe("K", lambda ns, name, old, new: seen.append((old, new)))
    catalog.put("K", "", "a", 1)
    catalog.assume("K", "", "a", 2)
    catalog.put("K", "", "a", 1)  # the same server copy: the assumption stays, nothing shown changes
    catalog.restore("K", "", "a")
    catalog.remove("K", "", "a")
    assert seen == [(None, 1), (1, 2), (2, 1), (1, None)]
