"""kube-scheduler's queueing hints: which changes move a pending pod, asked of the plugins that
rejected it (kube's `isPodWorthRequeuing` and each plugin's `isSchedulableAfter...`), on a fake clock."""

from __future__ import annotations

from typing import Any

from placer.engine.framework import ClusterEvent, FilterPlugin
from placer.engine.objects import NodeInfo, PodInfo
from placer.engine.parsing import parse_node, parse_pod
from placer.engine.queue import SchedulingQueue, pod_update_events
from placer.testing import affinity_term, make_plugin, node, pod, spread_constraint

from tests.engine.test_queue import FakeClock

E = ClusterEvent
TOLERATE_GPU = {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}


def filt(name: str, args: dict[str, Any] | None = None) -> FilterPlugin[Any]:
    plugin = make_plugin(name, args)
    assert isinstance(plugin, FilterPlugin)
    return plugin


def n(name: str = "n1", **kwargs: Any) -> NodeInfo:
    return parse_node(node(name, **kwargs))


def p(name: str = "p", **kwargs: Any) -> PodInfo:
    kwargs.setdefault("uid", f"uid-{name}")
    return parse_pod(pod(name, **kwargs))


def waiting(queue: SchedulingQueue, clock: FakeClock, target: PodInfo, *rejectors: FilterPlugin[Any]) -> None:
    """`target` rejected by `rejectors` three times: backing off 4 s, its hints asked on changes."""
    waiting_all(queue, clock, [(target, rejectors)])


def waiting_all(
    queue: SchedulingQueue, clock: FakeClock, pods: list[tuple[PodInfo, tuple[FilterPlugin[Any], ...]]]
) -> None:
    """Each pod rejected by its rejectors three times, together: all backing off 4 s."""
    for target, _ in pods:
        queue.add(target)
    for attempt in range(3):
        delay = 0.0
        for _ in pods:
            popped = queue.pop()
            assert popped is not None
            rejectors = {t.key: r for t, r in pods}[popped.key]
            events = frozenset().union(*(r.events for r in rejectors))
            delay = queue.backoff(popped.key, events, rejectors=rejectors) or 0.0
        if attempt < 2:
            clock.advance(delay)
    assert queue.pop() is None


def test_pod_update_events_are_kubes_pod_scheduling_properties_change() -> None:
    base = p(cpu="1", labels={"app": "a"})
    assert pod_update_events(base, p(cpu="1", labels={"app": "a"})) == ()
    assert pod_update_events(base, p(cpu="1", labels={"app": "b"})) == (E.POD_LABEL,)
    assert pod_update_events(base, p(cpu="500m", labels={"app": "a"})) == (E.POD_SCALE_DOWN,)
    assert pod_update_events(base, p(cpu="2", labels={"app": "a"})) == ()  # grown: nothing helps
    assert pod_update_events(base, p(cpu="1", labels={"app": "a"}, tolerations=[TOLERATE_GPU])) == (E.POD_TOLERATION,)


def test_a_toleration_added_moves_a_pod_taints_rejected_at_once() -> None:
    """The issue's case: kube binds it 0.1 s after the update; before, Placer waited its backoff."""
    clock = FakeClock()
    queue = SchedulingQueue(clock=clock)
    before = p()
    waiting(queue, clock, before, filt("TaintToleration"))
    after = p(tolerations=[TOLERATE_GPU])
    queue.add(after)
    queue.wake_pod(after.key, pod_update_events(before, after), before)
    popped = queue.pop()  # nothing else to do: at once, not after the 4 s backoff
    assert popped is after


def test_an_own_update_moves_a_pod_only_when_a_rejector_registered_it() -> None:
    clock = FakeClock()
    queue = SchedulingQueue(clock=clock)
    before = p(cpu="8")
    waiting(queue, clock, before, filt("NodeResourcesFit"))
    relabelled = p(cpu="8", labels={"x": "y"})
    queue.add(relabelled)
    queue.wake_pod(before.key, pod_update_events(before, relabelled), before)
    tolerating = p(cpu="8", labels={"x": "y"}, tolerations=[TOLERATE_GPU])
    queue.add(tolerating)
    queue.wake_pod(before.key, pod_update_events(relabelled, tolerating), relabelled)
    assert queue.pop() is None  # NodeResourcesFit cares for neither
    shrunk = p(cpu="1", labels={"x": "y"}, tolerations=[TOLERATE_GPU])
    queue.add(shrunk)
    queue.wake_pod(before.key, pod_update_events(tolerating, shrunk), tolerating)
    assert queue.pop() is shrunk  # its own resize down (kube's UpdatePodScaleDown)


def test_node_changes_move_only_the_pods_they_may_help() -> None:
    clock = FakeClock()
    queue = SchedulingQueue(clock=clock)
    tainted = p("tainted")
    cordoned = p("cordoned")
    selector = p("selector", node_selector={"disk": "ssd"})
    waiting_all(queue, clock, [(tainted, (filt("TaintToleration"),)), (cordoned, (filt("NodeUnschedulable"),)),
                               (selector, (filt("NodeAffinity"),))])
    # a label unrelated to any of them, on a node still tainted and cordoned
    old = n(taints=["gpu:NoSchedule"], unschedulable=True)
    new = n(taints=["gpu:NoSchedule"], unschedulable=True, labels={"zone": "a"})
    queue.wake(E.NODE_UPDATE, old, new)
    assert queue.pop() is None
    # the label the selector wants: that pod alone
    old, new = new, n(taints=["gpu:NoSchedule"], unschedulable=True, labels={"zone": "a", "disk": "ssd"})
    queue.wake(E.NODE_UPDATE, old, new)
    assert [queue.pop(), queue.pop()] == [selector, None]
    # uncordoned
    old, new = new, n(taints=["gpu:NoSchedule"], labels={"zone": "a", "disk": "ssd"})
    queue.wake(E.NODE_UPDATE, old, new)
    assert [queue.pop(), queue.pop()] == [cordoned, None]
    # untainted
    old, new = new, n(labels={"zone": "a", "disk": "ssd"})
    queue.wake(E.NODE_UPDATE, old, new)
    assert [queue.pop(), queue.pop()] == [tainted, None]


def test_node_hints_as_kubes() -> None:
    taints, unschedulable, affinity = filt("TaintToleration"), filt("NodeUnschedulable"), filt("NodeAffinity")
    plain = p()
    assert taints.queueing_hint(plain, E.NODE_ADD, None, n()) is True
    assert taints.queueing_hint(plain, E.NODE_ADD, None, n(taints=["gpu:NoSchedule"])) is False
    assert taints.queueing_hint(plain, E.NODE_UPDATE, n(), n(taints=["x:PreferNoSchedule"])) is False  # fitted before
    assert taints.queueing_hint(p(tolerations=[TOLERATE_GPU]), E.NODE_ADD, None, n(taints=["gpu:NoSchedule"])) is True
    assert unschedulable.queueing_hint(plain, E.NODE_ADD, None, n(unschedulable=True)) is False
    assert unschedulable.queueing_hint(plain, E.NODE_UPDATE, n(), n(labels={"a": "b"})) is False
    tolerates_cordon = p(tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}])
    assert unschedulable.queueing_hint(tolerates_cordon, E.POD_TOLERATION, plain, tolerates_cordon) is True
    assert unschedulable.queueing_hint(p(tolerations=[TOLERATE_GPU]), E.POD_TOLERATION, plain, plain) is False
    required = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "rank", "operator": "Gt", "values": ["3"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["special"]}]}]}}
    picky = p(affinity=required)
    assert affinity.queueing_hint(picky, E.NODE_ADD, None, n(labels={"rank": "4"})) is True
    assert affinity.queueing_hint(picky, E.NODE_ADD, None, n(labels={"rank": "3"})) is False
    assert affinity.queueing_hint(picky, E.NODE_ADD, None, n("special")) is True
    assert affinity.queueing_hint(picky, E.NODE_UPDATE, n(labels={"rank": "5"}), n(labels={"rank": "6"})) is False
    assert affinity.queueing_hint(picky, E.NODE_DELETE, n(), None) is True  # (not registered: not asked)
    assert E.NODE_DELETE not in affinity.events
    fit, big = filt("NodeResourcesFit"), p(cpu="8")
    assert fit.queueing_hint(big, E.NODE_ADD, None, n(cpu="4")) is False  # it would not fit even empty
    assert fit.queueing_hint(big, E.NODE_ADD, None, n(cpu="16")) is True
    assert fit.queueing_hint(big, E.NODE_UPDATE, n(cpu="4"), n(cpu="16")) is True  # allocatable grew
    assert fit.queueing_hint(big, E.NODE_UPDATE, n(cpu="16"), n(cpu="16", labels={"a": "b"})) is False
    more_memory = (n(cpu="16", memory="8Gi"), n(cpu="16", memory="16Gi"))
    assert fit.queueing_hint(big, E.NODE_UPDATE, *more_memory) is False  # not something it asks for
    assert fit.queueing_hint(p(cpu="8", memory="1Gi"), E.NODE_UPDATE, *more_memory) is True


def test_placed_pods_hints_as_kubes() -> None:
    affinity = p(pod_affinity={"requiredDuringSchedulingIgnoredDuringExecution": [
        affinity_term(match_labels={"app": "web"})]})
    anti = p(pod_anti_affinity={"requiredDuringSchedulingIgnoredDuringExecution": [
        affinity_term(match_labels={"app": "db"})]})
    inter = filt("InterPodAffinity")
    web, db, other = p("w", labels={"app": "web"}), p("d", labels={"app": "db"}), p("o", labels={"app": "x"})
    assert inter.queueing_hint(affinity, E.POD_ADD, None, web) is True
    assert inter.queueing_hint(affinity, E.POD_ADD, None, other) is False
    assert inter.queueing_hint(anti, E.POD_ADD, None, db) is False  # a new peer never lifts anti-affinity
    assert inter.queueing_hint(affinity, E.POD_UPDATE, other, web) is True  # relabelled into its affinity
    assert inter.queueing_hint(anti, E.POD_UPDATE, db, other) is True  # relabelled out of its anti-affinity
    assert inter.queueing_hint(anti, E.POD_UPDATE, other, db) is False
    assert inter.queueing_hint(anti, E.POD_DELETE, db, None) is True
    assert inter.queueing_hint(anti, E.POD_DELETE, other, None) is False
    keeps_away = p("k", pod_anti_affinity={"requiredDuringSchedulingIgnoredDuringExecution": [
        affinity_term(match_labels={"role": "batch"})]})
    assert inter.queueing_hint(p(labels={"role": "batch"}), E.POD_DELETE, keeps_away, None) is True
    assert inter.queueing_hint(anti, E.POD_LABEL, anti, anti) is True  # its own labels
    selected = p(pod_anti_affinity={"requiredDuringSchedulingIgnoredDuringExecution": [
        affinity_term(match_labels={"app": "db"}, namespace_selector={})]})
    assert inter.queueing_hint(selected, E.POD_DELETE, p("o", labels={"app": "x"}, namespace="ns"), None) is True
    spread = filt("PodTopologySpread")
    spreading = p(labels={"app": "web"}, spread=[spread_constraint(match_labels={"app": "web"})])
    assert spread.queueing_hint(spreading, E.POD_ADD, None, web) is True
    assert spread.queueing_hint(spreading, E.POD_ADD, None, other) is False
    assert spread.queueing_hint(spreading, E.POD_DELETE, p("w", labels={"app": "web"}, namespace="ns"), None) is False
    assert spread.queueing_hint(spreading, E.POD_UPDATE, web, p("w", labels={"app": "web", "v": "2"})) is False
    assert spread.queueing_hint(spreading, E.POD_UPDATE, web, other) is True
    assert spread.queueing_hint(spreading, E.POD_TOLERATION, spreading, spreading) is False
    honour = p(spread=[spread_constraint(match_labels={"app": "web"}, nodeTaintsPolicy="Honor")])
    assert spread.queueing_hint(honour, E.POD_TOLERATION, honour, honour) is True
    fit = filt("NodeResourcesFit")
    big = p(cpu="2")
    assert fit.queueing_hint(big, E.POD_UPDATE, p("o", cpu="1"), p("o", cpu="1", labels={"a": "b"})) is False
    assert fit.queueing_hint(big, E.POD_UPDATE, p("o", cpu="1"), p("o", cpu="500m")) is True
    assert fit.queueing_hint(big, E.POD_DELETE, p("o", cpu="1"), None) is True


def test_a_cluster_event_no_rejector_registered_moves_a_pod_waiting_for_it_otherwise() -> None:
    """A pod waits for some events for reasons beyond its rejectors (a preemption victim gone, its
    group changed): those move it whatever the hints say; a hint that raises moves it (kube's
    Queue on error)."""

    class Broken(FilterPlugin[Any]):
        name = "Broken"
        events = frozenset({E.NODE})

        def filter(self, pod: PodInfo, cluster: Any) -> None:
            return None

        def queueing_hint(self, pod: PodInfo, event: str, old: Any, new: Any) -> bool:
            raise RuntimeError("broken hint")

    clock = FakeClock()
    queue = SchedulingQueue(clock=clock)
    victim_waiter, broken = p("v", cpu="8"), p("b")
    fit = filt("NodeResourcesFit")
    queue.add(victim_waiter)
    queue.pop()
    queue.backoff(victim_waiter.key, fit.events | {"PodGroup"}, rejectors=(fit,))
    queue.add(broken)
    queue.pop()
    queue.backoff(broken.key, Broken.events, rejectors=(Broken(None),))  # type: ignore[arg-type]
    queue.wake(E.POD_UPDATE, p("o", cpu="1"), p("o", cpu="1", labels={"a": "b"}))
    assert queue.pop() is None
    queue.wake("PodGroup")
    assert [queue.pop(), queue.pop()] == [victim_waiter, None]
    queue.wake(E.NODE_UPDATE, n(), n(labels={"a": "b"}))
    assert queue.pop() is broken


def test_a_pod_moved_waits_behind_active_pods_and_at_most_its_initial_backoff() -> None:
    clock = FakeClock()
    queue = SchedulingQueue(clock=clock)
    target = p("t")
    waiting(queue, clock, target, filt("NodeUnschedulable"))
    busy = p("busy", priority=10)
    queue.add(busy)
    queue.wake(E.NODE_ADD, None, n("new"))
    entry = queue.entry(target.key)
    assert entry is not None and entry.moved and entry.ready_at == entry.last_attempt + 1.0
    assert [queue.pop(), queue.pop(), queue.pop()] == [busy, target, None]
    queue.backoff(target.key, filt("NodeUnschedulable").events, rejectors=(filt("NodeUnschedulable"),))
    queue.wake(E.NODE_ADD, None, n("cordoned", unschedulable=True))  # cannot help: stays waiting
    assert queue.pop() is None and queue.next_ready_in() == 8.0
