"""Plugin packages in the operator, over real HTTP against the emulator with the real CRD installed: a
profile naming the example package's AnnotationScore (installed in the venv by `make install`) places
pods by the nodes' annotation; one naming a plugin no package provides gets Ready=False, UnknownPlugin."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.controller.helpers import OperatorThread, until
from tests.controller.helpers import profile_ready as ready
from tests.kubeemu import ApiError, KubeEmulator

Start = Callable[..., Awaitable[OperatorThread]]
CRD = Path(__file__).resolve().parents[2] / "crds" / "schedulerprofiles.placer.dev.yaml"
KEY = "placer.dev/score"


def node_of(emu: KubeEmulator, name: str) -> str | None:
    pod = emu.get("pods", name, "default")
    return None if pod is None else pod["spec"].get("nodeName")


def annotated_scores(key: str = KEY) -> list[dict[str, Any]]:
    return [{"name": "AnnotationScore", "weight": 10, "args": {"annotationKey": key}}]


def annotate(emu: KubeEmulator, node: str, value: str) -> None:
    emu.patch("nodes", node, {"metadata": {"annotations": {KEY: value}}})


async def test_a_plugin_package_schedules_and_an_unknown_plugin_is_reported(
    kube_emulator: KubeEmulator, launch: Start
) -> None:
    emu = kube_emulator
    emu.install_crd(yaml.safe_load(CRD.read_text()))
    for name in ("a", "b", "c"):
        emu.add_node(name)
    annotate(emu, "a", "1")
    annotate(emu, "b", "90")  # c has none: 0
    emu.create("sp", {"metadata": {"name": "annotated"}, "spec": {"schedulerName": "annotated",
                                                                  "scores": annotated_scores()}})
    emu.create("sp", {"metadata": {"name": "missing"}, "spec": {"schedulerName": "missing",
                                                                "scores": [{"name": "NoSuchPlugin"}]}})
    with pytest.raises(ApiError, match=r"spec\.scores\[0\]\.name"):  # the CRD's pattern refuses a malformed name
        emu.create("sp", {"metadata": {"name": "malformed"}, "spec": {"schedulerName": "m",
                                                                      "scores": [{"name": "no-such-plugin"}]}})
    emu.add_pod("p1", scheduler_name="annotated")
    emu.add_pod("stuck", scheduler_name="missing")
    operator = await launch()
    assert operator.state is not None
    cluster = operator.state.cluster

    await until(lambda: node_of(emu, "p1"), timeout=10)
    assert node_of(emu, "p1") == "b"
    condition = await until(lambda: ready(emu, "missing"), timeout=10)
    assert (condition["status"], condition["reason"]) == ("False", "UnknownPlugin"), condition
    assert condition["message"].startswith(
        'profile "missing": scores[0] NoSuchPlugin: name: unknown plugin "NoSuchPlugin" (installed: AnnotationScore, ')
    assert (ready(emu, "annotated") or {}).get("reason") == "Loaded"

    # the annotation moves, and so do the next pods (an annotation change is a node update)
    annotate(emu, "c", "500")
    await until(lambda: (node := cluster.node("c")) is not None and node.annotations.get(KEY) == "500")
    emu.add_pod("p2", scheduler_name="annotated")
    await until(lambda: node_of(emu, "p2"), timeout=10)
    assert node_of(emu, "p2") == "c"

    # an update naming an unknown plugin: UnknownPlugin, and the last good version keeps scheduling
    emu.patch("sp", "annotated", {"spec": {"scores": [{"name": "AnnotationScroe"}]}})
    await until(lambda: (ready(emu, "annotated") or {}).get("reason") == "UnknownPlugin", timeout=10)
    condition = ready(emu, "annotated")
    assert condition is not None and condition["observedGeneration"] == 2
    assert 'unknown plugin "AnnotationScroe"' in condition["message"]
    assert condition["message"].endswith("; generation 1 keeps scheduling")
    emu.add_pod("p3", scheduler_name="annotated")
    await until(lambda: node_of(emu, "p3"), timeout=10)
    assert node_of(emu, "p3") == "c"
    assert node_of(emu, "stuck") is None  # no profile serves its schedulerName
