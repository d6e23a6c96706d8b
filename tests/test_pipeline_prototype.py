"""bench/pipeline_prototype.py (issue 25's three-process design) against the emulated API server
over real HTTP: every pod bound once within capacity, one Scheduled event each, each stage's CPU
reported; and bench/real_bench.py's reading of those reports and of a process tree's CPU."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import audit  # noqa: E402
import e2e_bench  # noqa: E402 - the emulator's loader (32 POSTs in flight)
import real_bench  # noqa: E402
import synthetic  # noqa: E402
from placer.controller.binding.reporting import REPORTING_CONTROLLER  # noqa: E402

from tests.kubeemu import EmulatorProcess  # noqa: E402

NAME = real_bench.PIPELINE_NAME


def _stage_lines(log: str) -> dict[str, dict]:
    return {(stage := json.loads(line.removeprefix("pipeline-stage ")))["stage"]: stage
            for line in log.splitlines() if line.startswith("pipeline-stage ")}


def test_prototype_binds_every_pod_once_within_capacity(tmp_path: Path) -> None:
    nodes, pods, _ = synthetic.cluster(40, 300)
    others = pods[250:]  # another scheduler's pods: left alone
    for pod in pods:
        pod["spec"]["schedulerName"] = NAME
    for pod in others:
        pod["spec"]["schedulerName"] = "someone-else"
    with EmulatorProcess("--no-record-requests") as emu:
        e2e_bench.populate(emu, nodes, pods, profiles=[])
        kubeconfig = emu.write_kubeconfig(tmp_path / "kubeconfig")
        log = tmp_path / "prototype.log"
        with open(log, "wb") as out:
            process = subprocess.Popen([sys.executable, str(ROOT / "bench" / "pipeline_prototype.py"), str(kubeconfig),
                                        "bench", NAME], stdout=out, stderr=subprocess.STDOUT)
            try:
                deadline = time.monotonic() + 60
                while emu.control("GET", "stats").get("bindings", 0) < 250 and time.monotonic() < deadline:
                    assert process.poll() is None, log.read_text()
                    time.sleep(0.1)
                time.sleep(0.5)  # nothing more is bound (the others are not ours)
                process.send_signal(signal.SIGTERM)
                assert process.wait(30) == 0
            finally:
                if process.poll() is None:
                    process.kill()
        bound = emu.control("GET", "stats").get("bindings", 0)
        served = emu.request("GET", "/api/v1/namespaces/bench/pods")["items"]
        node_objs = emu.request("GET", "/api/v1/nodes")["items"]
        events = emu.request("GET", "/apis/events.k8s.io/v1/namespaces/bench/events")["items"]
    text = log.read_text()
    assert bound == 250, text
    by_name = {pod["metadata"]["name"]: pod for pod in served}
    assert all(by_name[p["metadata"]["name"]]["spec"].get("nodeName") for p in pods[:250])
    assert not any(by_name[p["metadata"]["name"]]["spec"].get("nodeName") for p in others)
    assert sum(audit.audit(node_objs, served).values()) == 0
    scheduled = [e for e in events if e.get("reason") == "Scheduled"]
    assert len(scheduled) == 250 and {e["reportingController"] for e in scheduled} == {REPORTING_CONTROLLER}
    assert all(e["note"].startswith("Successfully assigned bench/") for e in scheduled)
    stages = _stage_lines(text)
    assert set(stages) == {"reader", "decider", "writer"}
    assert len({stage["pid"] for stage in stages.values()}) == 3  # three processes
    assert stages["writer"]["items"] == 250 and stages["decider"]["items"] == 250
    assert stages["reader"]["items"] >= 40 + 300 + 250  # nodes, pods listed, their bindings seen
    assert stages["decider"]["steps"]["decide (schedule)"] > 0
    assert stages["reader"]["steps"]["recognise a binding"] > 0  # bound pods not parsed again


def test_pipeline_stages_read_per_bound_pod(tmp_path: Path) -> None:
    log = tmp_path / "pipeline.log"
    stage = {"stage": "decider", "pid": 1, "cpu_s": 3.0, "startup_cpu_s": 1.0, "last_cpu_s": 2.0, "items": 500,
             "peak_rss_mb": 60.0, "steps": {"decide (schedule)": 0.25}}
    log.write_text("starting\npipeline-stage " + json.dumps(stage) + "\n")
    stages = real_bench.pipeline_stages(log, 500)
    assert stages["decider"]["cpu_ms_per_pod"] == pytest.approx(2.0)  # (2.0 - 1.0) s over 500 pods
    assert stages["decider"]["steps_ms_per_pod"] == {"decide (schedule)": pytest.approx(0.5)}
    assert real_bench.pipeline_stages(tmp_path / "missing.log", 500) == {}
    runs = [{key: 1.0 for key in real_bench.MEDIANS} | {"stages": real_bench.pipeline_stages(log, bound)}
            for bound in (500, 1000, 250)]
    assert real_bench.medians(runs)["stages"]["decider"]["cpu_ms_per_pod"] == pytest.approx(2.0)


def test_cpu_and_rss_count_a_process_tree() -> None:
    """The prototype's stages are children of the measured process: their CPU counts."""
    spin = ("import time\nend = time.process_time() + 0.3\n"
            "while time.process_time() < end: pass\nprint('x', flush=True)\n")
    parent = subprocess.Popen([sys.executable, "-c", (
        "import subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-c', {spin!r} + 'time.sleep(60)'], stdout=subprocess.PIPE)\n"
        "child.stdout.readline(); print('ready', flush=True); time.sleep(60)\n")], stdout=subprocess.PIPE)
    try:
        assert parent.stdout is not None and parent.stdout.readline() == b"ready\n"
        tree = real_bench.process_tree(parent.pid)
        assert len(tree) == 2 and tree[0] == parent.pid
        own = real_bench.cpu_seconds(parent.pid) - real_bench.cpu_seconds(tree[1])
        assert real_bench.cpu_seconds(parent.pid) >= own + 0.25  # the child's spin counted
        assert real_bench.peak_rss_mb(parent.pid) > real_bench.peak_rss_mb(tree[1])
    finally:
        for pid in real_bench.process_tree(parent.pid)[::-1]:
            os.kill(pid, signal.SIGKILL)
        parent.wait(10)

