"""``resource.k8s.io/v1`` as a v1.34 to v1.36 API server stores it (``pkg/registry/resource``): the
fields of DRAConsumableCapacity and DRADeviceBindingConditions (beta, on by default from v1.36)
dropped on an older server unless already in use, and what a claim's status update may change.

On a status update of a ResourceClaim (``ValidateResourceClaimStatusUpdate``, v1.36's messages):

- ``status.allocation`` cannot change once set (``field is immutable``);
- ``status.reservedFor`` needs an allocation;
- ``status.devices`` entries must name an allocated device (with its share, for a shared one); the
  entries of devices no longer allocated are dropped first (``dropDeallocatedStatusDevices``);
- a ``shareID`` must be a UUID in RFC 4122 normalized form.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .resources import Obj

CONSUMABLE_CAPACITY = "DRAConsumableCapacity"
BINDING_CONDITIONS = "DRADeviceBindingConditions"
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_HEX = "[0-9a-fA-F]"
_ANY_UUID = re.compile(rf"(urn:uuid:|\{{)?{_HEX}{{8}}-?{_HEX}{{4}}-?{_HEX}{{4}}-?{_HEX}{{4}}-?{_HEX}{{12}}\}}?")


def _results(claim: Obj | None) -> list[Obj]:
    allocation = ((claim or {}).get("status") or {}).get("allocation") or {}
    return list((allocation.get("devices") or {}).get("results") or [])


def _device_key(entry: Obj) -> tuple[Any, ...]:
    return entry.get("driver"), entry.get("pool"), entry.get("device"), entry.get("shareID")


# --- ResourceSlice ---------------------------------------------------------------------------------


def drop_slice_fields(new: Obj, old: Obj | None, on: frozenset[str]) -> None:
    """``dropDisabledDRAConsumableCapacityFields`` / ``...DeviceBindingConditionsFields`` of a slice
    (``new`` owned; its sub-trees are copied before writing)."""
    old_devices = ((old or {}).get("spec") or {}).get("devices") or []
    capacity = CONSUMABLE_CAPACITY in on or any(
        "allowMultipleAllocations" in d or any("requestPolicy" in c for c in (d.get("capacity") or {}).values())
        for d in old_devices)
    binding = BINDING_CONDITIONS in on or any(
        d.get("bindingConditions") or d.get("bindingFailureConditions") or "bindsToNode" in d for d in old_devices)
    spec = new.get("spec")
    if (capacity and binding) or not isinstance(spec, dict) or not isinstance(spec.get("devices"), list):
        return
    devices = []
    for device in spec["devices"]:
        device = dict(device)
        if not capacity:
            device.pop("allowMultipleAllocations", None)
            if isinstance(device.get("capacity"), dict):
                device["capacity"] = {name: {k: v for k, v in c.items() if k != "requestPolicy"}
                                      for name, c in device["capacity"].items()}
        if not binding:
            for field in ("bindingConditions", "bindingFailureConditions", "bindsToNode"):
                device.pop(field, None)
        devices.append(device)
    new["spec"] = {**spec, "devices": devices}


# --- ResourceClaim (and a template's claim spec) -----------------------------------------------------


def _capacity_in_use(spec: Obj) -> bool:
    devices = spec.get("devices") or {}
    if any("distinctAttribute" in c for c in devices.get("constraints") or []):
        return True
    for request in devices.get("requests") or []:
        if "capacity" in (request.get("exactly") or {}):
            return True
        if any("capacity" in sub for sub in request.get("firstAvailable") or []):
            return True
    return False


def drop_claim_spec_fields(spec: Obj, old_spec: Obj | None, on: frozenset[str]) -> Obj:
    """``dropDisabledDRAResourceClaimConsumableCapacityFields`` of a claim spec: a copy without
    ``distinctAttribute`` and capacity requests where the gate is off and the old spec used none."""
    if CONSUMABLE_CAPACITY in on or _capacity_in_use(old_spec or {}) or not isinstance(spec.get("devices"), dict):
        return spec
    devices = dict(spec["devices"])
    if isinstance(devices.get("constraints"), list):
        devices["constraints"] = [{k: v for k, v in c.items() if k != "distinctAttribute"}
                                  for c in devices["constraints"]]
    if isinstance(devices.get("requests"), list):
        requests = []
        for request in devices["requests"]:
            request = dict(request)
            if isinstance(request.get("exactly"), dict):
                request["exactly"] = {k: v for k, v in request["exactly"].items() if k != "capacity"}
            if isinstance(request.get("firstAvailable"), list):
                request["firstAvailable"] = [{k: v for k, v in sub.items() if k != "capacity"}
                                             for sub in request["firstAvailable"]]
            requests.append(request)
        devices["requests"] = requests
    return {**spec, "devices": devices}


def drop_claim_status_fields(new: Obj, old: Obj | None, on: frozenset[str]) -> None:
    """The status strategy's drops: shares, consumed capacity and binding conditions of the results
    where their gate is off and the old claim used none; then the `status.devices` entries of
    devices no longer allocated."""
    status = new.get("status")
    if not isinstance(status, dict):
        return
    old_results = _results(old)
    capacity = CONSUMABLE_CAPACITY in on or _capacity_in_use((old or {}).get("spec") or {}) or any(
        "shareID" in r or "consumedCapacity" in r for r in old_results) or any(
        "shareID" in d for d in ((old or {}).get("status") or {}).get("devices") or [])
    binding = BINDING_CONDITIONS in on or any(
        "bindingConditions" in r or "bindingFailureConditions" in r for r in old_results)
    status = new["status"] = dict(status)
    allocation = status.get("allocation")
    if isinstance(allocation, dict) and not (capacity and binding):
        dropped = [k for k, on_ in (("shareID", capacity), ("consumedCapacity", capacity),
                                    ("bindingConditions", binding), ("bindingFailureConditions", binding)) if not on_]
        devices = dict(allocation.get("devices") or {})
        devices["results"] = [{k: v for k, v in r.items() if k not in dropped} for r in devices.get("results") or []]
        status["allocation"] = {**allocation, "devices": devices}
    if not capacity and isinstance(status.get("devices"), list):
        status["devices"] = [{k: v for k, v in d.items() if k != "shareID"} for d in status["devices"]]
    # dropDeallocatedStatusDevices
    gone = {_device_key(r) for r in old_results} - {_device_key(r) for r in _results(new)}
    if gone and isinstance(status.get("devices"), list):
        kept = [d for d in status["devices"] if _device_key(d) not in gone]
        if kept:
            status["devices"] = kept
        else:
            status.pop("devices", None)


def _show(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def validate_claim_status_update(new: Obj, old: Obj) -> list[str]:
    """``ValidateResourceClaimStatusUpdate`` (the part a scheduler's writes meet)."""
    errors: list[str] = []
    status = new.get("status") or {}
    old_allocation = (old.get("status") or {}).get("allocation")
    allocation = status.get("allocation")
    if status.get("reservedFor") and not allocation:
        errors.append("status.reservedFor: Forbidden: may not be specified when `allocated` is not set")
    if old_allocation and allocation and allocation != old_allocation:
        errors.append(f"status.allocation: Invalid value: {_show(allocation)}: field is immutable")
    for i, result in enumerate(_results(new)):
        share = result.get("shareID")
        problem = None if share is None else _uid_problem(str(share))
        if problem is not None:
            errors.append(f'status.allocation.devices.results[{i}].shareID: Invalid value: "{share}": {problem}')
    allocated = {_device_key(r) for r in _results(new)}
    for i, device in enumerate(status.get("devices") or []):
        key = _device_key(device)
        if key not in allocated:
            shown = json.dumps({"Driver": key[0], "Pool": key[1], "Device": key[2], "ShareID": key[3] or ""},
                               separators=(",", ":"))
            errors.append(f"status.devices[{i}]: Invalid value: {shown}: must be an allocated device in the claim")
    return errors


def _uid_problem(uid: str) -> str | None:
    """``validateUID``'s complaint (google/uuid's Validate, then the normalized form), None if fine."""
    if len(uid) not in (32, 36, 38, 45):
        return f"error validating uid: invalid UUID length: {len(uid)}"
    if not _ANY_UUID.fullmatch(uid):
        return "error validating uid: invalid UUID format"
    if not _UUID.match(uid):
        return ("uid must be in RFC 4122 normalized form, `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with lowercase "
                "hexadecimal characters")
    return None
