#!/usr/bin/env python3
"""Requeue timings on a real control plane (issue 24): for each of nine cases a pod of the profile's
schedulerName is made unschedulable, left 3 s into its backoff, then the change is made; prints the
seconds from the change to the binding. Usage: KUBECONFIG=... hack/requeue_check.py SCHEDULER_NAME
(a scheduler for that name running: `placer run`, or kube-scheduler with a profile of that name).
"""

import json
import subprocess
import sys
import time

SN = sys.argv[1]


def k(*args, inp=None):
    return subprocess.run(["kubectl", *args], input=inp, capture_output=True, text=True, check=True).stdout


def apply(obj):
    k("apply", "-f", "-", inp=json.dumps(obj))


def node(name, cpu="4", labels=None, taints=None, unsched=False):
    apply(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "spec": {"taints": taints or [], "unschedulable": unsched},
            "status": {
                "capacity": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
                "allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ready"}],
            },
        }
    )


def pod(name, ns="t", cpu="100m", labels=None, **spec):
    apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
            "spec": {
                "schedulerName": SN,
                "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}],
                **spec,
            },
        }
    )


def node_of(name, ns="t"):
    return json.loads(k("-n", ns, "get", "pod", name, "-o", "json"))["spec"].get("nodeName")


def failed(name, ns="t"):
    ev = json.loads(k("-n", ns, "get", "events", "-o", "json"))["items"]
    return any(e["involvedObject"]["name"] == name and e["reason"] == "FailedScheduling" for e in ev)


def wait(cond, timeout=20):
    t = time.monotonic()
    while time.monotonic() - t < timeout:
        if cond():
            return time.monotonic() - t
        time.sleep(0.05)
    return None


k("create", "ns", "t")
results = {}


def case(name, setup, change, podname):
    setup()
    if wait(lambda: failed(podname)) is None:
        results[name] = "never failed"
        return
    time.sleep(3)  # well into its backoff
    t0 = time.monotonic()
    change()
    took = wait(lambda: node_of(podname) is not None, timeout=30)
    results[name] = None if took is None else round(time.monotonic() - t0, 2)
    print(name, results[name], flush=True)


case(
    "toleration",
    lambda: (
        node("a1", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]),
        pod("tol", nodeSelector={"kubernetes.io/hostname": "a1"}),
    ),
    lambda: k(
        "-n",
        "t",
        "patch",
        "pod",
        "tol",
        "--type=json",
        "-p",
        json.dumps([{"op": "add", "path": "/spec/tolerations", "value": [{"key": "k", "operator": "Exists"}]}]),
    ),
    "tol",
)
case(
    "gates",
    lambda: (
        node("a2"),
        pod("gated", schedulingGates=[{"name": "x"}], nodeSelector={"kubernetes.io/hostname": "a2"}),
        apply(
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": "gated.fake", "namespace": "t"},
                "involvedObject": {"name": "gated", "namespace": "t"},
                "reason": "FailedScheduling",
                "message": "gated",
            }
        ),
    ),
    lambda: k(
        "-n",
        "t",
        "patch",
        "pod",
        "gated",
        "--type=json",
        "-p",
        json.dumps([{"op": "remove", "path": "/spec/schedulingGates"}]),
    ),
    "gated",
)
case(
    "node-label", lambda: pod("sel", nodeSelector={"want": "yes"}), lambda: k("label", "node", "a2", "want=yes"), "sel"
)
case(
    "uncordon",
    lambda: (node("a3", unsched=True), pod("unc", nodeSelector={"kubernetes.io/hostname": "a3"})),
    lambda: k("uncordon", "a3"),
    "unc",
)
case(
    "untaint",
    lambda: (
        node("a4", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]),
        pod("unt", nodeSelector={"kubernetes.io/hostname": "a4"}),
    ),
    lambda: k("taint", "node", "a4", "k=v:NoSchedule-"),
    "unt",
)
case("node-added", lambda: pod("big", cpu="6"), lambda: node("a5", cpu="8"), "big")


def full():
    node("a6", cpu="1")
    pod("filler", cpu="1", nodeSelector={"kubernetes.io/hostname": "a6"})
    wait(lambda: node_of("filler"))
    pod("wants", cpu="1", nodeSelector={"kubernetes.io/hostname": "a6"})


case("assigned-deleted", full, lambda: k("-n", "t", "delete", "pod", "filler", "--grace-period=0", "--force"), "wants")


def affinity():
    node("a7")
    pod("mate", nodeSelector={"kubernetes.io/hostname": "a7"})
    wait(lambda: node_of("mate"))
    pod(
        "follower",
        affinity={
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"team": "x"}}, "topologyKey": "kubernetes.io/hostname"}
                ]
            }
        },
    )


case("assigned-label", affinity, lambda: k("-n", "t", "label", "pod", "mate", "team=x"), "follower")


def anti():
    node("a8")
    pod("blocker", labels={"team": "y"}, nodeSelector={"kubernetes.io/hostname": "a8"})
    wait(lambda: node_of("blocker"))
    pod(
        "loner",
        nodeSelector={"kubernetes.io/hostname": "a8"},
        affinity={
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"team": "y"}}, "topologyKey": "kubernetes.io/hostname"}
                ]
            }
        },
    )


case("assigned-label-removed", anti, lambda: k("-n", "t", "label", "pod", "blocker", "team-"), "loner")
print(json.dumps(results))
