"""Malformed and hostile input: profiles and pods that must yield a clear error, never a crash.

Each case names what the error must mention (the field), so a test fails if the message loses
its pointer. Shared by the engine tests and the operator's integration tests, which check the
same cases end to end (profile status, FailedScheduling events).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

LONG = "x" * 253
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
UNICODE = "планировщик-調度-🚀"


@dataclass(frozen=True)
class ProfileCase:
    id: str
    spec: Any
    #: substrings the error must contain; None = the profile is valid and must load
    error: tuple[str, ...] | None
    #: the status reason of the error (ProfileError.reason)
    reason: str = "InvalidArgs"


@dataclass(frozen=True)
class PodCase:
    id: str
    spec: dict[str, Any]
    #: substrings of the FailedScheduling message; None = the pod is valid and must be placed
    error: tuple[str, ...] | None
    metadata: dict[str, Any] = field(default_factory=dict)


def _scores(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"schedulerName": "hostile", "scores": list(entries)}


def _filters(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"schedulerName": "hostile", "filters": list(entries)}


PROFILE_CASES: tuple[ProfileCase, ...] = (
    ProfileCase(
        "weight-as-string", _scores({"name": "ImageLocality", "weight": "5"}), ("scores[0] ImageLocality: weight",)
    ),
    ProfileCase("weight-absurd", _scores({"name": "ImageLocality", "weight": 10**9}), ("weight", "100")),
    ProfileCase("weight-negative", _scores({"name": "ImageLocality", "weight": -1}), ("weight",)),
    ProfileCase("args-not-a-mapping", _scores({"name": "NodeResourcesFit", "args": "fast"}), ("args",)),
    ProfileCase(
        "unknown-strategy",
        _scores({"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "Random"}}}),
        ("NodeResourcesFit", "args.scoringStrategy.type"),
    ),
    ProfileCase(
        "rtcr-without-shape",
        _scores({"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "RequestedToCapacityRatio"}}}),
        ("NodeResourcesFit", "requestedToCapacityRatio"),
    ),
    ProfileCase(
        "rtcr-shape-out-of-range",
        _scores(
            {
                "name": "NodeResourcesFit",
                "args": {
                    "scoringStrategy": {
                        "type": "RequestedToCapacityRatio",
                        "requestedToCapacityRatio": {"shape": [{"utilization": 150, "score": 0}]},
                    }
                },
            }
        ),
        ("utilization",),
    ),
    ProfileCase(
        "rtcr-shape-not-increasing",
        _scores(
            {
                "name": "NodeResourcesFit",
                "args": {
                    "scoringStrategy": {
                        "type": "RequestedToCapacityRatio",
                        "requestedToCapacityRatio": {
                            "shape": [{"utilization": 50, "score": 1}, {"utilization": 10, "score": 5}]
                        },
                    }
                },
            }
        ),
        ("shape", "increasing"),
    ),
    ProfileCase(
        "balanced-weight-not-one",
        _scores({"name": "NodeResourcesBalancedAllocation", "args": {"resources": [{"name": "cpu", "weight": 2}]}}),
        ("NodeResourcesBalancedAllocation", "args.resources[0].weight", "Input should be 1"),
    ),
    ProfileCase(
        "prefer-node-empty", _scores({"name": "PreferNode", "args": {"nodes": []}}), ("PreferNode", "args.nodes")
    ),
    ProfileCase(
        "spread-without-label-key", _scores({"name": "SpreadByLabel", "args": {}}), ("SpreadByLabel", "labelKey")
    ),
    ProfileCase(
        "utilization-threshold-absurd",
        _filters({"name": "NodeUtilization", "args": {"cpuThreshold": 5}}),
        ("NodeUtilization", "cpuThreshold"),
    ),
    ProfileCase(
        "utilization-threshold-wrong-type",
        _filters({"name": "NodeUtilization", "args": {"memoryThreshold": "high"}}),
        ("memoryThreshold",),
    ),
    ProfileCase(
        "label-value-not-a-string",
        _filters({"name": "NodeLabel", "args": {"required": {"cpu": True}}}),
        ("NodeLabel", "args.required.cpu"),
    ),
    ProfileCase("unknown-plugin", _scores({"name": "NodeFoo"}), ("NodeFoo", 'unknown plugin "NodeFoo"'),
                "UnknownPlugin"),
    ProfileCase("filter-only-plugin-in-scores", _scores({"name": "NodeReady"}), ("NodeReady", "not a score plugin")),
    ProfileCase(
        "score-only-plugin-in-filters", _filters({"name": "PreferNode"}), ("PreferNode", "not a filter plugin")
    ),
    ProfileCase(
        "duplicate-plugin", _filters({"name": "NodeReady"}, {"name": "NodeReady"}), ("filters[1]", "Duplicate")
    ),
    ProfileCase(
        "percentage-too-high",
        {"schedulerName": "hostile", "percentageOfNodesToScore": 101},
        ("percentageOfNodesToScore",),
    ),
    ProfileCase(
        "percentage-as-string",
        {"schedulerName": "hostile", "percentageOfNodesToScore": "half"},
        ("percentageOfNodesToScore",),
    ),
    ProfileCase("missing-scheduler-name", {"filters": []}, ("schedulerName",)),
    ProfileCase("empty-scheduler-name", {"schedulerName": ""}, ("schedulerName",)),
    ProfileCase("spec-not-a-mapping", ["schedulerName", "hostile"], ("spec",)),
    ProfileCase("unknown-spec-field", {"schedulerName": "hostile", "filterz": []}, ("filterz",)),
    ProfileCase(
        "unknown-args-field",
        _scores({"name": "PreferNode", "args": {"nodes": ["a"], "node": "b"}}),
        ("PreferNode", "args.node"),
    ),
    ProfileCase(
        "thousands-of-plugins", _scores(*({"name": "ImageLocality"} for _ in range(5000))), ("scores[1]", "Duplicate")
    ),
    ProfileCase("unicode-scheduler-name", {"schedulerName": "hostile-" + UNICODE}, None),
    ProfileCase("very-long-scheduler-name", {"schedulerName": "hostile-" + LONG}, None),
)


def _container(**resources: Any) -> dict[str, Any]:
    return {"name": "main", "image": "registry.example/app:1", "resources": resources}


POD_CASES: tuple[PodCase, ...] = (
    PodCase(
        "cpu-not-a-quantity",
        {"containers": [_container(requests={"cpu": "abc"})]},
        ("spec.containers[0].resources.requests.cpu",),
    ),
    PodCase(
        "memory-two-dots",
        {"containers": [_container(requests={"memory": "1.2.3Gi"})]},
        ("spec.containers[0].resources.requests.memory",),
    ),
    PodCase("negative-cpu", {"containers": [_container(requests={"cpu": "-1"})]}, ("requests.cpu",)),
    PodCase("astronomic-memory", {"containers": [_container(requests={"memory": "1e30"})]}, ("requests.memory",)),
    PodCase("bad-limit", {"containers": [_container(limits={"nvidia.com/gpu": "one"})]}, ("limits.nvidia.com/gpu",)),
    PodCase(
        "bad-init-container",
        {"containers": [_container()], "initContainers": [_container(requests={"cpu": "1x"})]},
        ("spec.initContainers[0].resources.requests.cpu",),
    ),
    PodCase("bad-overhead", {"containers": [_container()], "overhead": {"memory": "lots"}}, ("spec.overhead.memory",)),
    PodCase("requests-not-a-mapping", {"containers": [_container(requests=["cpu", "1"])]}, ("resources.requests",)),
    PodCase("containers-not-a-list", {"containers": "nginx"}, ("spec.containers",)),
    PodCase(
        "toleration-unknown-effect",
        {"containers": [_container()], "tolerations": [{"key": "a", "operator": "Exists", "effect": "Sometimes"}]},
        ("spec.tolerations[0].effect", "Sometimes"),
    ),
    PodCase(
        "toleration-unknown-operator",
        {"containers": [_container()], "tolerations": [{"key": "a", "operator": "Maybe"}]},
        ("spec.tolerations[0].operator",),
    ),
    PodCase(
        "affinity-bad-operator",
        {
            "containers": [_container()],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "zone", "operator": "Near", "values": ["a"]}]}
                        ]
                    }
                }
            },
        },
        ("matchExpressions[0].operator", "Near"),
    ),
    PodCase(
        "affinity-gt-not-a-number",
        {
            "containers": [_container()],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["ten"]}]}
                        ]
                    }
                }
            },
        },
        ("values[0]", "ten"),
    ),
    PodCase(
        "affinity-in-without-values",
        {
            "containers": [_container()],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In"}]}]
                    }
                }
            },
        },
        ("matchExpressions[0].values",),
    ),
    PodCase(
        "match-fields-wrong-key",
        {
            "containers": [_container()],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchFields": [{"key": "metadata.labels", "operator": "In", "values": ["a"]}]}
                        ]
                    }
                }
            },
        },
        ("matchFields[0].key",),
    ),
    PodCase(
        "preferred-weight-zero",
        {
            "containers": [_container()],
            "affinity": {
                "nodeAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 0, "preference": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}}
                    ]
                }
            },
        },
        ("preferredDuringSchedulingIgnoredDuringExecution[0].weight",),
    ),
    PodCase(
        "host-port-out-of-range",
        {"containers": [{**_container(), "ports": [{"containerPort": 80, "hostPort": 70000}]}]},
        ("hostPort",),
    ),
    PodCase(
        "node-selector-not-a-string",
        {"containers": [_container()], "nodeSelector": {"zone": 5}},
        ("spec.nodeSelector.zone",),
    ),
    PodCase("priority-not-a-number", {"containers": [_container()], "priority": "high"}, ("spec.priority",)),
    PodCase(
        "anti-affinity-unknown-operator",
        {"containers": [_container()], "affinity": {"podAntiAffinity": {REQUIRED: [
            {"labelSelector": {"matchExpressions": [{"key": "app", "operator": "Near", "values": ["x"]}]},
             "topologyKey": "kubernetes.io/hostname"}]}}},
        ("podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0]"
         ".operator", '"Near"'),
    ),
    PodCase(
        "affinity-without-topology-key",
        {"containers": [_container()], "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "x"}}}]}}},
        ("podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey", "Required value"),
    ),
    PodCase(
        "affinity-terms-not-a-list",
        {"containers": [_container()], "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "topologyKey": "zone"}}}},
        ("podAffinity.requiredDuringSchedulingIgnoredDuringExecution", "must be a list"),
    ),
    PodCase(
        "preferred-pod-affinity-weight-zero",
        {"containers": [_container()], "affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 0, "podAffinityTerm": {"topologyKey": "zone"}}]}}},
        ("preferredDuringSchedulingIgnoredDuringExecution[0].weight",),
    ),
    PodCase(
        "selector-label-key-invalid",
        {"containers": [_container()], "affinity": {"podAntiAffinity": {REQUIRED: [
            {"labelSelector": {"matchLabels": {"not a key!": "x"}}, "topologyKey": "kubernetes.io/hostname"}]}}},
        ("labelSelector.matchLabels", "not a key!"),
    ),
    PodCase(
        "spread-empty-topology-key",
        {"containers": [_container()], "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": "", "whenUnsatisfiable": "DoNotSchedule"}]},
        ("spec.topologySpreadConstraints[0].topologyKey", "Required value"),
    ),
    PodCase(
        "spread-zero-max-skew",
        {"containers": [_container()], "topologySpreadConstraints": [
            {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]},
        ("spec.topologySpreadConstraints[0].maxSkew",),
    ),
    PodCase(
        "spread-unknown-action",
        {"containers": [_container()], "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "Sometimes"}]},
        ("spec.topologySpreadConstraints[0].whenUnsatisfiable", '"Sometimes"'),
    ),
    PodCase(
        "spread-min-domains-with-schedule-anyway",
        {"containers": [_container()], "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway", "minDomains": 2}]},
        ("spec.topologySpreadConstraints[0].minDomains",),
    ),
    PodCase(
        "spread-bad-selector-values",
        {"containers": [_container()], "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In"}]}}]},
        ("spec.topologySpreadConstraints[0].labelSelector.matchExpressions[0].values", "Required value"),
    ),
    PodCase(
        "restart-rules-not-a-list",
        {"containers": [{**_container(), "restartPolicyRules": {"action": "RestartAllContainers"}}]},
        ("spec.containers[0].restartPolicyRules", "must be a list"),
    ),
    PodCase(
        "image-volume-not-an-object",
        {"containers": [_container()], "volumes": [{"name": "model", "image": "registry.example/model:1"}]},
        ("spec.volumes[0].image", "must be an object"),
    ),
    PodCase(
        "numeric-toleration",  # v1.36's Gt/Lt: valid, tolerating nothing while kube's gate is off
        {"containers": [_container(requests={"cpu": "10m"})],
         "tolerations": [{"key": "sla", "operator": "Gt", "value": "950", "effect": "NoSchedule"}]},
        None,
    ),
    PodCase(
        "huge-label-set",
        {"containers": [_container(requests={"cpu": "10m"})]},
        None,
        metadata={"labels": {f"label-{i}": f"value-{i}" for i in range(5000)}},
    ),
    PodCase(
        "unicode-labels",
        {"containers": [_container(requests={"cpu": "10m"})]},
        None,
        metadata={"labels": {"tenant": UNICODE}},
    ),
)
