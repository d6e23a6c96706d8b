"""Every tunable of the operator in one place: the CLI takes the defaults, tests shorten the times."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["SERVICE_ACCOUNT_NAMESPACE", "Options", "default_identity", "default_lease_namespace"]

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def default_identity() -> str:
    """`$POD_NAME` (set by the chart through the downward API), else the host name."""
    return os.environ.get("POD_NAME") or socket.gethostname()


def default_lease_namespace() -> str:
    """`$POD_NAMESPACE`, else the in-cluster service account's namespace, else `placer-system`."""
    namespace = os.environ.get("POD_NAMESPACE")
    if namespace:
        return namespace
    try:
        namespace = SERVICE_ACCOUNT_NAMESPACE.read_text(encoding="utf-8").strip()
    except OSError:
        namespace = ""
    return namespace or "placer-system"


@dataclass
class Options:
    """How one operator instance runs; the defaults are kube-scheduler's where it has one."""

    namespaces: tuple[str, ...] = ()  # empty: every namespace
    kubeconfig: str | None = None  # None: in-cluster, else $KUBECONFIG / ~/.kube/config
    metrics_port: int = 8080  # 0: no /metrics and /healthz server
    metrics_host: str = "0.0.0.0"
    verbose: bool = False

    # leader election, as kube-scheduler's defaults
    leader_elect: bool = True
    identity: str = field(default_factory=default_identity)
    lease_namespace: str = field(default_factory=default_lease_namespace)
    lease_name: str = "placer"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    release_on_exit: bool = True  # tests turn it off to play a crashed leader

    # the scheduling queue (API.md §3: 1 s doubling to 10 s)
    initial_backoff: float = 1.0
    max_backoff: float = 10.0

    # the hot path
    max_binds_in_flight: int = 32
    # how long a PreBind waits for its condition (e.g. VolumeBinding: the PV controller or a
    # provisioner binding the claims) when its plugin does not say, before the pod is sent back to
    # the queue: kube-scheduler's VolumeBinding `bindTimeoutSeconds`
    pre_bind_timeout: float = 600.0

    # reporting: events and conditions are posted by workers off the hot path
    report_workers: int = 8
    report_queue_limit: int = 10_000
    event_series_interval: float = 30.0  # least time between two series updates of one event

    # objects per page of an informer's LIST (its pages are filed while the server prepares the next)
    list_page: int = 500

    # shadow profiles (API.md §5): their decisions take at most this share of the scheduling
    # loop's time while active pods are ready (all of its idle time otherwise), each remembers at
    # most `shadow_memory` pods, and its status.shadow is written at most every interval
    shadow_busy_share: float = 0.05
    shadow_memory: int = 10_000
    shadow_status_interval: float = 5.0

    # a node whose kubelet refused a pod is counted as that kubelet counts it until pods in the watch
    # explain the difference, its Node object changes, or this many seconds pass
    # (placer.controller.informers.kubelet_rejections)
    kubelet_settle: float = 30.0

    # NodeMetrics for NodeUtilization, polled only while an active profile uses it
    metrics_poll_interval: float = 15.0

    # API calls (the informers' LISTs and watches have their own settings below)
    api_retries: int = 5
    api_timeout: float = 30.0
    api_max_backoff: float = 5.0

    # /healthz: the API server must have answered within this window; pinged when idle
    health_window: float = 60.0
    health_ping_interval: float = 10.0

    # the informers' watch streams: the server ends each after `watch_server_timeout` seconds
    watch_server_timeout: int = 300
    watch_connect_timeout: float = 10.0
    # failed LISTs and watches (5xx, 429, no answer) are retried forever, the delay doubling from
    # `watch_backoff` up to `watch_max_backoff` (Kopf's own start-up requests too)
    watch_backoff: float = 1.0
    watch_max_backoff: float = 16.0
    # a collection the server does not serve (a PodGroup API, a CRD) is asked for again this often
    group_discovery_interval: float = 60.0
