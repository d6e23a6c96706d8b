"""Prometheus metrics, written out by hand in the text exposition format (version 0.0.4).

A handful of counters, gauges and one histogram do not justify a dependency; the hot path only
increments dict entries (through a series whose labels it resolved once: `labels(...)`), and the
text is built when `/metrics` is scraped.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable, Mapping

__all__ = ["DURATION_BUCKETS", "Counter", "CounterSeries", "Gauge", "Histogram", "HistogramSeries", "Metrics"]

# kube-scheduler's scheduling_attempt_duration_seconds buckets: 1 ms doubling, 15 of them
DURATION_BUCKETS: tuple[float, ...] = tuple(0.001 * 2**i for i in range(15))

Labels = tuple[tuple[str, str], ...]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: Labels, extra: Labels = ()) -> str:
    pairs = (*labels, *extra)
    if not pairs:
        return ""
    return "{" + ",".join(f'{key}="{_escape(value)}"' for key, value in pairs) + "}"


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer():
        return str(int(value))
    return repr(float(value))


class _Metric:
    kind = ""

    def __init__(self, name: str, help_text: str) -> None:
        self.name = name
        self.help = help_text

    def header(self) -> list[str]:
        return [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.kind}"]

    def lines(self) -> list[str]:
        raise NotImplementedError


class Counter(_Metric):
    kind = "counter"

    def __init__(self, name: str, help_text: str) -> None:
        super().__init__(name, help_text)
        self.values: dict[Labels, float] = {}

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        self.values[key] = self.values.get(key, 0.0) + amount

    def labels(self, **labels: str) -> CounterSeries:
        """One series, its labels resolved once (for a hot path that counts it again and again)."""
        return CounterSeries(self, tuple(sorted(labels.items())))

    def get(self, **labels: str) -> float:
        return self.values.get(tuple(sorted(labels.items())), 0.0)

    def lines(self) -> list[str]:
        return [f"{self.name}{_labels(key)} {_number(value)}" for key, value in sorted(self.values.items())]


class CounterSeries:
    """One series of a Counter (`Counter.labels`)."""

    __slots__ = ("_counter", "_key")

    def __init__(self, counter: Counter, key: Labels) -> None:
        self._counter = counter
        self._key = key

    def inc(self, amount: float = 1.0) -> None:
        values = self._counter.values
        values[self._key] = values.get(self._key, 0.0) + amount


class Gauge(_Metric):
    """A gauge set directly, or computed at scrape time by `source` (label dict -> value)."""

    kind = "gauge"

    def __init__(
        self, name: str, help_text: str, source: Callable[[], Iterable[tuple[Mapping[str, str], float]]] | None = None
    ) -> None:
        super().__init__(name, help_text)
        self.values: dict[Labels, float] = {}
        self.source = source

    def set(self, value: float, **labels: str) -> None:
        self.values[tuple(sorted(labels.items()))] = value

    def replace(self, series: Iterable[tuple[Mapping[str, str], float]]) -> None:
        """Every series at once: those not given are gone (a deleted object's, a label value that
        changed), in one assignment a concurrent scrape sees whole."""
        self.values = {tuple(sorted(labels.items())): value for labels, value in series}

    def get(self, **labels: str) -> float:
        return self.values.get(tuple(sorted(labels.items())), 0.0)

    def lines(self) -> list[str]:
        values = dict(self.values)
        if self.source is not None:
            for labels, value in self.source():
                values[tuple(sorted(labels.items()))] = value
        return [f"{self.name}{_labels(key)} {_number(value)}" for key, value in sorted(values.items())]


class Histogram(_Metric):
    kind = "histogram"

    def __init__(self, name: str, help_text: str, buckets: tuple[float, ...] = DURATION_BUCKETS) -> None:
        super().__init__(name, help_text)
        self.buckets = buckets
        self.series: dict[Labels, tuple[list[int], list[float]]] = {}

    def observe(self, value: float, **labels: str) -> None:
        self.labels(**labels).observe(value)

    def labels(self, **labels: str) -> HistogramSeries:
        """One series, its labels resolved once (for a hot path that observes it again and again)."""
        return HistogramSeries(self, tuple(sorted(labels.items())))

    def count(self, **labels: str) -> int:
        entry = self.series.get(tuple(sorted(labels.items())))
        return sum(entry[0]) if entry else 0

    def lines(self) -> list[str]:
        out: list[str] = []
        for key, (counts, total) in sorted(self.series.items()):
            running = 0
            for bound, count in zip((*self.buckets, math.inf), counts, strict=True):
                running += count
                out.append(f"{self.name}_bucket{_labels(key, (('le', _number(bound)),))} {running}")
            out.append(f"{self.name}_sum{_labels(key)} {_number(total[0])}")
            out.append(f"{self.name}_count{_labels(key)} {running}")
        return out


class HistogramSeries:
    """One series of a Histogram (`Histogram.labels`), created (in the exposition) by its first
    observation."""

    __slots__ = ("_histogram", "_key")

    def __init__(self, histogram: Histogram, key: Labels) -> None:
        self._histogram = histogram
        self._key = key

    def observe(self, value: float) -> None:
        histogram = self._histogram
        entry = histogram.series.get(self._key)
        if entry is None:
            entry = histogram.series[self._key] = ([0] * (len(histogram.buckets) + 1), [0.0])
        entry[0][bisect.bisect_left(histogram.buckets, value)] += 1
        entry[1][0] += value


class Metrics:
    """Placer's metrics (API.md §4) plus a few for operating it."""

    def __init__(self) -> None:
        self.attempts = Counter(
            "placer_schedule_attempts_total",
            "Scheduling attempts by result (scheduled, unschedulable, error) and profile.",
        )
        self.attempt_duration = Histogram(
            "placer_scheduling_attempt_duration_seconds",
            "Time to decide for one pod (filter, score, select), by result and profile.",
        )
        self.pending = Gauge(
            "placer_pending_pods", "Pods in the scheduling queue, by queue (active, backoff, in_flight)."
        )
        self.reloads = Counter(
            "placer_profile_reloads_total",
            "SchedulerProfile (re)loads by profile and result (success, invalid).",
        )
        self.profile_ready = Gauge(
            "placer_profile_ready",
            "1 when the SchedulerProfile's Ready condition is True, else 0, by profile and the condition's "
            "reason (Loaded, InvalidArgs, UnknownPlugin, Conflict); a deleted profile has no series.",
        )
        self.bindings = Counter(
            "placer_bindings_total", "Binding calls by result (bound, conflict, gone, failed)."
        )
        self.volume_binds = Counter(
            "placer_volume_binds_total",
            "Volume bindings written before a pod's bind (kube's PreBind), by result (bound, failed, "
            "timeout, gone, abandoned).",
        )
        self.volume_binds_waiting = Gauge(
            "placer_volume_binds_waiting", "Pods whose volumes are being bound (waiting for the PV controller "
            "or a provisioner).",
        )
        # the PreBind plugins' families (`PreBindPlugin.metric`): results and pods in that PreBind now
        self.pre_binds: dict[str, tuple[Counter, Gauge]] = {
            "volume_binds": (self.volume_binds, self.volume_binds_waiting),
        }
        self.preemptions = Counter(
            "placer_preemptions_total",
            "Preemptions decided (a node nominated for a pod, its victims chosen), by profile.",
        )
        self.preemption_victims = Counter(
            "placer_preemption_victims_total",
            "Preemption victims by result (deleted, gone: already deleted, failed: the condition or the "
            "delete was refused, abandoned: the preemptor was deleted, bound or displaced meanwhile, or "
            "leadership was lost).",
        )
        self.kubelet_rejections = Counter(
            "placer_kubelet_rejections_total",
            "Pods Placer bound that the node's kubelet refused (admission: OutOfcpu, OutOfmemory, OutOfpods, "
            "NodeAffinity, UnexpectedAdmissionError...), by profile and the kubelet's reason.",
        )
        self.kubelet_withheld = Gauge(
            "placer_kubelet_withheld_nodes",
            "Nodes counted as their kubelet counts them after a refusal, until the watch explains it or the "
            "settle time passes, by kind (amounts: resources or host ports withheld; held: the node held whole).",
        )
        self.leader = Gauge("placer_leader", "1 while this instance holds the leader Lease (or runs without one).")
        self.reports_dropped = Counter(
            "placer_reports_dropped_total", "Events and condition writes dropped because their queue was full."
        )
        self.api_errors = Counter("placer_api_errors_total", "Failed API calls made by placer itself, by call.")
        self.shadow_decisions = Counter(
            "placer_shadow_decisions_total",
            "Shadow profiles' choices compared with the node the shadowed scheduler bound the pod to, by "
            "profile and outcome (same, equal: another node of the best total, different, unschedulable: "
            "Placer found no node).",
        )
        self.shadow_late = Counter(
            "placer_shadow_late_decisions_total",
            "Shadowed pods bound before their shadow decision was taken (active work goes first), decided "
            "then against the cluster without them, by profile.",
        )
        self.shadow_dropped = Counter(
            "placer_shadow_dropped_total",
            "Shadowed pods forgotten, undecided or unbound, because their shadow profile remembered too "
            "many, by profile.",
        )
        self.shadow_waiting = Gauge(
            "placer_shadow_waiting_pods", "Shadowed pods waiting for a shadow decision, by profile."
        )
        self._all: list[_Metric] = [
            self.attempts, self.attempt_duration, self.pending, self.reloads, self.profile_ready, self.bindings,
            self.volume_binds,
            self.volume_binds_waiting, self.preemptions, self.preemption_victims, self.kubelet_rejections,
            self.kubelet_withheld, self.leader,
            self.reports_dropped, self.api_errors, self.shadow_decisions, self.shadow_late, self.shadow_dropped,
            self.shadow_waiting,
        ]

    def render(self) -> str:
        lines: list[str] = []
        for metric in self._all:
            lines.extend(metric.header())
            lines.extend(metric.lines())
        return "\n".join(lines) + "\n"
