"""The real-cluster benchmark's parts that need no cluster: bench/synthetic.py's workloads,
bench/audit.py's checks of what they promise, and bench/real_bench.py's lock, object creation
order, CPU reading, version refusal, latency percentiles, the limit row's share and
kube-scheduler's metrics."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import audit  # noqa: E402
import real_bench  # noqa: E402
import synthetic  # noqa: E402

Obj = dict[str, Any]


def _schedulable(node: Obj) -> bool:
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"]["conditions"])
    return ready and not node["spec"].get("taints") and not node["spec"].get("unschedulable")


def _bind(pod: Obj, node: Obj, uid: str | None = None) -> Obj:
    bound = copy.deepcopy(pod)
    bound["spec"]["nodeName"] = node["metadata"]["name"]
    if uid:
        bound["metadata"]["uid"] = uid
    return bound


def test_every_workload_has_plains_nodes_and_pod_sizes() -> None:
    nodes, pods, objects = synthetic.cluster(30, 250)
    assert objects == []
    for workload in synthetic.WORKLOADS:
        other_nodes, other_pods, _ = synthetic.cluster(30, 250, workload=workload)
        assert other_nodes == nodes, workload
        assert [p["spec"]["containers"][0]["resources"]["requests"] for p in other_pods] == [
            p["spec"]["containers"][0]["resources"]["requests"] for p in pods], workload


def test_unknown_workload_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown workload 'gpus'"):
        synthetic.cluster(3, 3, workload="gpus")


def test_antiaffinity_groups_of_100_against_their_own_group() -> None:
    _, pods, _ = synthetic.cluster(10, 250, workload="antiaffinity")
    assert Counter(p["metadata"]["labels"]["group"] for p in pods) == {
        "group-0000": 100, "group-0001": 100, "group-0002": 50}
    for pod in pods:
        (term,) = pod["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert term == {"labelSelector": {"matchLabels": {"group": pod["metadata"]["labels"]["group"]}},
                        "topologyKey": "kubernetes.io/hostname"}


def test_spread_one_zone_constraint_and_no_node_selector() -> None:
    _, pods, _ = synthetic.cluster(10, 300, workload="spread")
    _, plain, _ = synthetic.cluster(10, 300)
    assert any("nodeSelector" in p["spec"] for p in plain)
    for pod in pods:
        assert "nodeSelector" not in pod["spec"]
        assert pod["spec"]["topologySpreadConstraints"] == [{
            "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"group": pod["metadata"]["labels"]["group"]}}}]


def test_preferred_affinity_and_anti_affinity_by_group() -> None:
    _, pods, _ = synthetic.cluster(10, 400, workload="preferred")
    kinds = {}
    for pod in pods:
        (kind, rule), = pod["spec"]["affinity"].items()
        (term,) = rule["preferredDuringSchedulingIgnoredDuringExecution"]
        assert term["weight"] == 1
        group = pod["metadata"]["labels"]["group"]
        assert term["podAffinityTerm"]["labelSelector"] == {"matchLabels": {"group": group}}
        kinds.setdefault(pod["metadata"]["labels"]["group"], set()).add(kind)
    assert kinds == {"group-0000": {"podAffinity"}, "group-0001": {"podAntiAffinity"},
                     "group-0002": {"podAffinity"}, "group-0003": {"podAntiAffinity"}}


def test_devices_a_class_a_slice_per_node_a_claim_per_pod() -> None:
    nodes, pods, objects = synthetic.cluster(5, 12, workload="devices")
    kinds = Counter(o["kind"] for o in objects)
    assert kinds == {"DeviceClass": 1, "ResourceSlice": 5, "ResourceClaim": 12}
    slices = [o for o in objects if o["kind"] == "ResourceSlice"]
    assert sorted(s["spec"]["nodeName"] for s in slices) == sorted(n["metadata"]["name"] for n in nodes)
    assert all(len(s["spec"]["devices"]) == synthetic.DEVICES_PER_NODE for s in slices)
    claims = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ResourceClaim"}
    for pod in pods:
        (ref,) = pod["spec"]["resourceClaims"]
        claim = claims[ref["resourceClaimName"]]
        assert claim["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == synthetic.DEVICE_CLASS
        assert pod["spec"]["containers"][0]["resources"]["claims"] == [{"name": ref["name"]}]


def _spread_out(pods: list[Obj], nodes: list[Obj]) -> list[Obj]:
    """Pod i in zone i % 3, on the zone's schedulable nodes in turn."""
    by_zone: dict[str, list[Obj]] = {}
    for node in nodes:
        if _schedulable(node):
            by_zone.setdefault(node["metadata"]["labels"]["topology.kubernetes.io/zone"], []).append(node)
    zones = [by_zone[zone] for zone in synthetic.ZONES]
    return [_bind(pod, zones[i % 3][(i // 3) % len(zones[i % 3])]) for i, pod in enumerate(pods)]


def test_audit_required_anti_affinity_of_the_workload() -> None:
    nodes, pods, _ = synthetic.cluster(200, 200, workload="antiaffinity")
    for pod in pods:
        pod["spec"].pop("nodeSelector", None)
        pod["spec"].pop("tolerations", None)
    bound = _spread_out(pods, nodes)
    assert audit.audit(nodes, bound)["anti_affinity"] == 0
    bound[1]["spec"]["nodeName"] = bound[0]["spec"]["nodeName"]  # two of group 0 on one node
    assert audit.audit(nodes, bound)["anti_affinity"] == 2  # each breaks the other's term
    bound[1]["spec"]["nodeName"] = bound[150]["spec"]["nodeName"]  # beside a pod of group 1: fine
    assert audit.audit(nodes, bound)["anti_affinity"] == 0


def test_audit_zone_skew_of_the_workload() -> None:
    nodes, pods, _ = synthetic.cluster(60, 100, workload="spread")
    for pod in pods:
        pod["spec"].pop("tolerations", None)
    bound = _spread_out(pods, nodes)
    assert audit.audit(nodes, bound)["spread"] == 0
    zone = {n["metadata"]["name"]: n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in nodes}
    in_a = next(b["spec"]["nodeName"] for b in bound if zone[b["spec"]["nodeName"]] == "zone-a")
    for pod in bound[:3]:
        pod["spec"]["nodeName"] = in_a
    assert audit.audit(nodes, bound)["spread"] == 1  # one group's constraint broken


def _allocate(claim: Obj, node: str, device: str, pod_uid: str) -> None:
    claim["status"] = {
        "allocation": {
            "devices": {"results": [{"request": "gpu", "driver": synthetic.DEVICE_DRIVER, "pool": node,
                                     "device": device}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]},
        },
        "reservedFor": [{"resource": "pods", "name": "x", "uid": pod_uid}],
    }


def _devices_run() -> tuple[list[Obj], list[Obj], list[Obj], list[Obj]]:
    """The devices workload, every pod bound to a schedulable node and its claim allocated there."""
    nodes, pods, objects = synthetic.cluster(20, 30, workload="devices")
    ready = [n for n in nodes if _schedulable(n)]
    claims = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ResourceClaim"}
    slices = [o for o in objects if o["kind"] == "ResourceSlice"]
    used: Counter[str] = Counter()
    bound = []
    for i, pod in enumerate(pods):
        pod["spec"].pop("nodeSelector", None)
        node = ready[i % len(ready)]["metadata"]["name"]
        bound.append(_bind(pod, ready[i % len(ready)], uid=f"pod-uid-{i}"))
        _allocate(claims[pod["spec"]["resourceClaims"][0]["resourceClaimName"]], node, f"gpu-{used[node]}",
                  f"pod-uid-{i}")
        used[node] += 1
    return nodes, bound, list(claims.values()), slices


def test_audit_devices_clean() -> None:
    nodes, bound, claims, slices = _devices_run()
    problems = audit.audit(nodes, bound, None, claims, slices)
    assert problems["device_double"] == 0 and problems["claim"] == 0
    assert sum(problems.values()) == 0


def test_audit_without_claims_has_no_device_keys() -> None:
    nodes, bound, _, _ = _devices_run()
    assert set(audit.audit(nodes, bound)) == set(audit.PROBLEMS)


def test_audit_devices_allocated_twice() -> None:
    nodes, bound, claims, slices = _devices_run()
    first, second = claims[0]["status"]["allocation"], claims[1]["status"]["allocation"]
    second["devices"]["results"][0].update(pool=first["devices"]["results"][0]["pool"],
                                           device=first["devices"]["results"][0]["device"])
    problems = audit.audit(nodes, bound, None, claims, slices)
    assert problems["device_double"] == 1
    assert problems["claim"] == 1  # the second pod's device is on another node


@pytest.mark.parametrize("breakage", ["unallocated", "missing", "unreserved", "other_node", "unknown_device",
                                      "allocation_elsewhere"])
def test_audit_a_bound_pods_claim_not_on_its_node(breakage: str) -> None:
    nodes, bound, claims, slices = _devices_run()
    claim = claims[3]
    result = claim["status"]["allocation"]["devices"]["results"][0]
    other = next(n["metadata"]["name"] for n in nodes if n["metadata"]["name"] != result["pool"])
    if breakage == "unallocated":
        del claim["status"]
    elif breakage == "missing":
        claims.remove(claim)
    elif breakage == "unreserved":
        claim["status"]["reservedFor"] = []
    elif breakage == "other_node":
        result.update(pool=other, device="gpu-7")
        claim["status"]["allocation"].pop("nodeSelector")
    elif breakage == "unknown_device":
        result["device"] = "gpu-99"
    else:
        claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] = [other]
    problems = audit.audit(nodes, bound, None, claims, slices)
    assert problems["claim"] == 1
    assert problems["device_double"] == 0


def test_audit_node_selector_terms() -> None:
    node = {"metadata": {"name": "n1", "labels": {"zone": "a", "gpus": "8"}}}
    match = audit._node_selector_matches
    assert match({"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]},
                 node)
    assert not match({"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "NotIn",
                                                                   "values": ["a"]}]}]}, node)
    assert match({"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                          "values": ["n2"]}]},
                                        {"matchExpressions": [{"key": "gpus", "operator": "Gt", "values": ["4"]}]}]},
                 node)
    assert not match({"nodeSelectorTerms": [{"matchExpressions": [{"key": "gpus", "operator": "Lt",
                                                                   "values": ["x"]}]}]}, node)
    assert not match({"nodeSelectorTerms": []}, node)


def test_object_calls_cluster_scoped_first_and_bare() -> None:
    _, _, objects = synthetic.cluster(3, 4, workload="devices")
    cluster_scoped, namespaced = real_bench.object_calls(list(reversed(objects)))
    assert {path for _, path, _, _ in cluster_scoped} == {"/apis/resource.k8s.io/v1/deviceclasses",
                                                          "/apis/resource.k8s.io/v1/resourceslices"}
    assert len(cluster_scoped) == 4
    assert {path for _, path, _, _ in namespaced} == {"/apis/resource.k8s.io/v1/namespaces/bench/resourceclaims"}
    assert all("uid" not in body["metadata"] for _, _, body, _ in cluster_scoped + namespaced)
    assert all("uid" in o["metadata"] for o in objects if o["kind"] == "ResourceClaim")  # the input is untouched
    assert real_bench.object_calls([]) == []
    with pytest.raises(ValueError, match="cannot create v1 PersistentVolume"):
        real_bench.object_calls(synthetic.cluster(3, 1, workload="claims")[2])


def test_real_workloads_leave_out_pvc_claims() -> None:
    assert "claims" not in real_bench.WORKLOADS
    assert {"plain", "relations", "antiaffinity", "spread", "preferred", "devices"} <= set(real_bench.WORKLOADS)


def test_cpu_seconds_and_meter() -> None:
    assert real_bench.cpu_seconds(os.getpid()) > 0
    assert real_bench.cpu_seconds(2**22 + 12345) != real_bench.cpu_seconds(2**22 + 12345)  # NaN: no such process
    meter = real_bench.CpuMeter({"apiserver": os.getpid(), "etcd": os.getpid()})
    meter.start()
    assert meter.first["scheduler"] == 0.0  # not started yet: counts from 0
    meter.pids["scheduler"] = os.getpid()
    sum(i * i for i in range(3_000_000))  # some CPU
    meter.binding(last=True)
    spent = meter.ms_per_pod(10)
    assert spent["cpu_ms_per_pod_apiserver"] > 0
    assert spent["cpu_ms_per_pod_scheduler"] >= spent["cpu_ms_per_pod_apiserver"]
    before = dict(meter.last)
    meter.binding(last=False)  # within CPU_EVERY of the last reading: not read again
    assert meter.last == before


def test_medians_and_table(capsys: pytest.CaptureFixture[str]) -> None:
    runs = [{key: value for key in real_bench.MEDIANS} | {"pods_per_s": value} for value in (1.0, 3.0, 2.0)]
    row = real_bench.medians(runs)
    assert row["pods_per_s"] == 2.0 and row["cpu_ms_per_pod_etcd"] == 2.0
    assert row["all_runs_pods_per_s"] == [1.0, 3.0, 2.0]
    real_bench.print_table({"placer": row})
    header, line = capsys.readouterr().out.splitlines()
    assert "CPU ms/pod: scheduler" in header and "etcd" in header
    assert line.split()[0] == "placer"


def test_latency_percentiles_from_creation_to_binding() -> None:
    created = {f"p{i}": 100.0 for i in range(100)}
    bound = {f"p{i}": 100.0 + (i + 1) / 1000 for i in range(100)}  # 1..100 ms
    bound.pop("p99")  # never bound: left out
    created["extra"] = 50.0  # never bound either
    latency = real_bench.latency_ms(created, bound)
    assert latency["latency_ms_p50"] == pytest.approx(50.0)
    assert latency["latency_ms_p99"] == pytest.approx(99.0)
    assert latency["latency_ms_max"] == pytest.approx(99.0)
    assert real_bench.percentile([3.0, 1.0, 2.0], 0.99) == 3.0 and real_bench.percentile([5.0], 0.5) == 5.0
    none = real_bench.latency_ms({}, bound)
    assert all(value != value for value in none.values())  # NaN: no latency without a creation time


def test_limit_row_share_and_stream_table(capsys: pytest.CaptureFixture[str]) -> None:
    runs = {which: [{key: 1.0 for key in real_bench.MEDIANS} | {"pods_per_s": rate}]
            for which, rate in (("limit", 800.0), ("kube-scheduler", 200.0), ("placer", 720.0))}
    table = {which: real_bench.medians(rows) for which, rows in runs.items()}
    assert real_bench.limit_shares(table) == {"kube-scheduler": 0.25, "placer": 0.9}
    assert real_bench.limit_shares({"placer": table["placer"]}) == {}  # no limit row: no share
    real_bench.print_table(table, stream=True)
    header, *lines = capsys.readouterr().out.splitlines()
    assert "latency p50/p99 ms" in header and [line.split()[0] for line in lines] == list(runs)
    assert lines[0].split()[-4] == "-"  # the limit row is not audited: no violations column


def test_medians_leave_out_nan() -> None:
    runs = [{key: 1.0 for key in real_bench.MEDIANS} | {"latency_ms_p99": value} for value in (float("nan"), 4.0, 2.0)]
    assert real_bench.medians(runs)["latency_ms_p99"] == 3.0


EXTENSION_POINT = "scheduler_framework_extension_point_duration_seconds"
FILTER = 'extension_point="Filter",profile="kube-bench",status="Success"'
SCORE = 'extension_point="Score",profile="kube-bench",status="Success"'
METRICS_PAGE = "\n".join([
    f"# HELP {EXTENSION_POINT} [STABLE] Latency for running all plugins of a specific extension point.",
    f"# TYPE {EXTENSION_POINT} histogram",
    f'{EXTENSION_POINT}_bucket{{{FILTER},le="0.0001"}} 10',
    f"{EXTENSION_POINT}_sum{{{FILTER}}} 0.7",
    f"{EXTENSION_POINT}_count{{{FILTER}}} 500",
    f"{EXTENSION_POINT}_sum{{{SCORE}}} 0.5",
    f"{EXTENSION_POINT}_count{{{SCORE}}} 500",
    'scheduler_scheduling_attempt_duration_seconds_sum{profile="kube-bench",result="scheduled"} 1.33',
    'scheduler_scheduling_attempt_duration_seconds_count{profile="kube-bench",result="scheduled"} 500',
    'scheduler_pending_pods{queue="active"} 0',
])


def test_kube_schedulers_histograms_from_its_metrics() -> None:
    found = real_bench.histograms(METRICS_PAGE)
    points = {e["labels"]["extension_point"]: e for e in found[EXTENSION_POINT]}
    assert points["Filter"]["count"] == 500 and points["Filter"]["mean_ms"] == pytest.approx(1.4)
    assert points["Score"]["mean_ms"] == pytest.approx(1.0)
    (attempt,) = found["scheduler_scheduling_attempt_duration_seconds"]
    assert attempt["labels"] == {"profile": "kube-bench", "result": "scheduled"}
    assert attempt["mean_ms"] == pytest.approx(2.66)
    assert "scheduler_pending_pods" not in found
    assert real_bench.extension_points(found) == "Filter 1.40, Score 1.00, attempt (scheduled) 2.66"


def test_placers_attempts_by_result_from_its_metrics() -> None:
    page = "\n".join([
        "# TYPE placer_schedule_attempts_total counter",
        'placer_schedule_attempts_total{profile="bench",result="scheduled"} 5000',
        'placer_schedule_attempts_total{profile="bench",result="unschedulable"} 12',
        'placer_schedule_attempts_total{profile="other",result="scheduled"} 3',
        'placer_bindings_total{profile="bench"} 5000',
    ])
    assert real_bench.attempts_by_result(page) == {"scheduled": 5003.0, "unschedulable": 12.0}
    assert real_bench.attempts_by_result("") == {}


@pytest.mark.skipif(shutil.which("flock") is None, reason="util-linux flock(1) not installed")
@pytest.mark.parametrize("wrapper", [["flock"], ["flock", "-o"], []])
def test_lock_taken_or_inherited(tmp_path: Path, wrapper: list[str]) -> None:
    """Started under `flock FILE` (descriptor inherited, or closed with -o) or alone, the script
    holds the lock at once rather than waiting for its own parent."""
    lock = tmp_path / "realcluster.lock"
    code = (f"import sys, pathlib; sys.path.insert(0, {str(ROOT / 'bench')!r}); import real_bench; "
            f"real_bench.LOCK = pathlib.Path({str(lock)!r}); fd = real_bench.hold_lock(); "
            "print('inherited' if fd is None else 'held')")
    command = [*wrapper, str(lock)] if wrapper else []
    done = subprocess.run([*command, sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ("inherited" if wrapper == ["flock", "-o"] else "held")


def test_lock_waits_for_another_holder(tmp_path: Path) -> None:
    lock = tmp_path / "realcluster.lock"
    hold = (f"import fcntl, os, time; fd = os.open({str(lock)!r}, os.O_RDONLY | os.O_CREAT); "
            "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)")
    holder = subprocess.Popen([sys.executable, "-c", hold], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        code = (f"import sys, pathlib; sys.path.insert(0, {str(ROOT / 'bench')!r}); import real_bench; "
                f"real_bench.LOCK = pathlib.Path({str(lock)!r}); real_bench.hold_lock()")
        waiting = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        assert waiting.stdout is not None
        line = waiting.stdout.readline()
        assert line.startswith(f"waiting for {lock} (held by ")
        assert waiting.poll() is None
        holder.kill()
        holder.wait(10)
        assert waiting.wait(30) == 0
    finally:
        holder.kill()


def test_devices_refused_before_v1_34(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "kube-apiserver").write_text("")
    monkeypatch.setattr(real_bench, "kube_version", lambda kube_bin: "v1.24.17")
    monkeypatch.setattr(real_bench, "hold_lock", lambda: pytest.fail("took the lock"))
    monkeypatch.setattr(sys, "argv", ["real_bench.py", "--kube-bin", str(tmp_path), "--workload", "devices"])
    assert real_bench.main() == real_bench.EXIT_UNSUPPORTED
    err = capsys.readouterr().err
    assert "workload devices refused: Kubernetes v1.24.17 does not serve resource.k8s.io/v1" in err


def _pod_event(kind: str, name: str, node: str | None, version: int) -> bytes:
    pod = {"metadata": {"name": name, "resourceVersion": str(version)}, "spec": {"nodeName": node} if node else {}}
    return (json.dumps({"type": kind, "object": pod}) + "\n").encode()


async def test_count_bindings_resumes_a_closed_watch_and_relists_after_410() -> None:
    """The API server closes a watch that falls behind: the count goes on from the last
    resourceVersion, and from a fresh list when that is too old."""
    from aiohttp import web

    watches: list[dict[str, str]] = []

    async def pods(request: web.Request) -> web.StreamResponse:
        query = dict(request.query)
        assert query["fieldSelector"] == "spec.nodeName!="
        if "watch" not in query:
            if query.get("limit") == "1":
                return web.json_response({"metadata": {"resourceVersion": "10"}, "items": []})
            return web.json_response({"metadata": {"resourceVersion": "30"}, "items": [
                {"metadata": {"name": f"p{i}", "resourceVersion": "30"}, "spec": {"nodeName": "n1"}}
                for i in (1, 2, 3, 4)]})
        watches.append(query)
        response = web.StreamResponse()
        await response.prepare(request)
        if len(watches) == 1:  # two bindings, then the server drops the watch
            await response.write(_pod_event("ADDED", "p1", "n1", 11))
            await response.write(_pod_event("BOOKMARK", "", None, 12))
            await response.write(_pod_event("ADDED", "p2", "n1", 13))
        elif len(watches) == 2:  # resumed from 13: too old by now
            await response.write((json.dumps({"type": "ERROR", "object": {
                "kind": "Status", "code": 410, "reason": "Expired"}}) + "\n").encode())
        else:  # after the list at 30: the last binding, and p2 seen on another node
            await response.write(_pod_event("MODIFIED", "p2", "n2", 31))
            await response.write(_pod_event("ADDED", "p5", "n1", 32))
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_get(f"/api/v1/namespaces/{real_bench.NAMESPACE}/pods", pods)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    api = real_bench.Api(f"http://127.0.0.1:{port}")
    try:
        watch = real_bench.Watch(expected=5)
        await real_bench.count_bindings(api, watch, deadline=time.time() + 30)
    finally:
        await api.close()
        await runner.cleanup()
    assert [w["resourceVersion"] for w in watches] == ["10", "13", "30"]
    assert sorted(watch.bound_at) == ["p1", "p2", "p3", "p4", "p5"]
    assert (watch.restarts, watch.relists) == (2, 1)
    assert watch.binds == {"p1": 1, "p2": 2, "p3": 1, "p4": 1, "p5": 1}  # p2 on two nodes: bound twice


def test_plane_ports_and_folder_from_realclusters_variables(tmp_path: Path) -> None:
    """RC_PORT, RC_ETCD_PORT and RC_DIR (realcluster.sh's) choose the plane: two side by side, each
    with its own lock."""
    code = (f"import sys; sys.path.insert(0, {str(ROOT / 'bench')!r}); import real_bench as r, pathlib; "
            "print(r.PORT, r.ETCD_PORT, r.SERVER, r.LOCK, r.plane_state(pathlib.Path('/default'))); "
            "env = r._plane_env(pathlib.Path('/bin'), pathlib.Path('/state'), r.PORT, '--x=1'); "
            "print(env['RC_PORT'], env['RC_ETCD_PORT'], env['RC_DIR'], env['RC_APISERVER_ARGS'])")
    environment = {k: v for k, v in os.environ.items() if not k.startswith("RC_")}
    mine = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env={
        **environment, "RC_PORT": "6643", "RC_ETCD_PORT": "2579", "RC_DIR": str(tmp_path),
        "RC_APISERVER_ARGS": "--v=2"}).stdout.splitlines()
    assert mine == [f"6643 2579 https://127.0.0.1:6643 /tmp/placer-realcluster-6643.lock {tmp_path}",
                    "6643 2579 /state --v=2 --x=1"]
    default = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env=environment).stdout.splitlines()
    assert default == ["6443 2379 https://127.0.0.1:6443 /tmp/placer-realcluster.lock /default",
                       "6443 2379 /state --x=1"]


def test_preemption_waves_place_every_preemptor_with_and_without_budgets() -> None:
    """bench/preemption_bench.py's `waves` shape: preemptors decided while earlier ones are still
    nominated, each placed on its nominated node once its victims go (asserted inside), budgets or not."""
    import preemption_bench

    for budget in (False, True):
        cluster = preemption_bench.waves_cluster(8, budget)
        assert len(cluster.pods) == 32
        assert preemption_bench.measure_waves(8, outstanding=3, preemptors=6, budget=budget) > 0
