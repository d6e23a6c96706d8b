"""`placer run`'s flags, as kube-scheduler names them, become the operator's Options: the kubeconfig,
the address of the health and metrics port, the Lease (kube-scheduler's own, as the cluster's
scheduler) and its timings as Go durations."""

from __future__ import annotations

import argparse

import pytest
from placer.cli import build_parser, duration, run_options
from placer.controller.options import Options


def options(*flags: str) -> Options:
    return run_options(build_parser().parse_args(["run", *flags]))


def test_the_defaults_are_the_operators(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "placer-system")
    got = options()
    assert (got.kubeconfig, got.metrics_port, got.metrics_host, got.leader_elect) == (None, 8080, "0.0.0.0", True)
    assert (got.lease_namespace, got.lease_name) == ("placer-system", "placer")
    assert (got.lease_duration, got.renew_deadline, got.retry_period, got.kubelet_settle) == (15.0, 10.0, 2.0, 30.0)


def test_as_the_clusters_scheduler(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the static-pod manifest (manifests/placer-scheduler.yaml) passes."""
    monkeypatch.setenv("POD_NAMESPACE", "kube-system")
    got = options("--kubeconfig", "/etc/kubernetes/scheduler.conf", "--bind-address", "127.0.0.1",
                  "--metrics-port", "10269", "--leader-elect-resource-namespace", "kube-system",
                  "--leader-elect-resource-name", "kube-scheduler", "--leader-elect-lease-duration", "15s",
                  "--leader-elect-renew-deadline", "10s", "--leader-elect-retry-period", "2s",
                  "-n", "a", "-n", "b", "--kubelet-settle", "1m")
    assert got.kubeconfig == "/etc/kubernetes/scheduler.conf"
    assert (got.metrics_host, got.metrics_port) == ("127.0.0.1", 10269)
    assert (got.lease_namespace, got.lease_name, got.leader_elect) == ("kube-system", "kube-scheduler", True)
    assert got.namespaces == ("a", "b") and got.kubelet_settle == 60.0
    assert options("--no-leader-elect").leader_elect is False


@pytest.mark.parametrize(("text", "seconds"), [
    ("15s", 15.0), ("1m30s", 90.0), ("500ms", 0.5), ("1h", 3600.0), ("2.5s", 2.5), ("7", 7.0), ("0.25", 0.25),
])
def test_go_durations(text: str, seconds: float) -> None:
    assert duration(text) == seconds


@pytest.mark.parametrize("text", ["", "s", "15x", "1m 30s", "-1s", "0s", "0", "abc", "15s10"])
def test_not_durations(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        duration(text)


def test_timings_must_keep_client_gos_order(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        options("--leader-elect-renew-deadline", "20s")
    assert exit_info.value.code == 2
    assert "--leader-elect-renew-deadline" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        options("--leader-elect-lease-duration", "nope")
