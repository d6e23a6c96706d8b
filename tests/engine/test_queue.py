"""The scheduling queue, on a fake clock: order, backoff 1 s doubling to 10 s, wake(), removal."""

from __future__ import annotations

from placer.engine.parsing import parse_pod
from placer.engine.queue import SchedulingQueue, queue_order
from placer.testing import make_plugin, pod

FIT = (make_plugin("NodeResourcesFit"),)  # a filter that rejected the pod: its hints judge changes


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def make(name: str, priority: int | None = None, created: str | None = None, namespace: str = "default") -> object:
    return parse_pod(pod(name, priority=priority, created=created, namespace=namespace))


def drain(queue: SchedulingQueue) -> list[str]:
    keys = []
    while (item := queue.pop()) is not None:
        keys.append(item.key)
    return keys


def test_priority_then_age_then_name() -> None:
    queue = SchedulingQueue(clock=FakeClock())
    for p in [
        make("old-low", 0, "2025-01-01T00:00:00Z"),
        make("new-high", 1000, "2025-01-03T00:00:00Z"),
        make("b-same", 100, "2025-01-02T00:00:00Z"),
        make("a-same", 100, "2025-01-02T00:00:00Z", namespace="zz"),
        make("a-same", 100, "2025-01-02T00:00:00Z"),
        make("older-mid", 100, "2025-01-01T00:00:00Z"),
        make("negative", -5, "2020-01-01T00:00:00Z"),
    ]:
        queue.add(p)  # type: ignore[arg-type]
    assert drain(queue) == [
        "default/new-high",
        "default/older-mid",
        "default/a-same",
        "default/b-same",
        "zz/a-same",
        "default/old-low",
        "default/negative",
    ]
    assert queue_order(make("x", 3, "2025-01-01T00:00:00Z")) == (-3, 1735689600.0, "default/x")  # type: ignore[arg-type]


def test_backoff_doubles_to_ten_seconds() -> None:
    clock = FakeClock()
    queue = SchedulingQueue(clock=clock)
    queue.add(make("p"))  # type: ignore[arg-type]
    delays = []
    for _ in range(7):
        popped = queue.pop()
        assert popped is not None
        assert popped.key == "default/p"
        delay = queue.backoff("default/p")
        delays.append(delay)
        assert queue.pop() is None  # waiting
        assert queue.next_ready_in() == delay
        clock.advance(delay - 0.001)  # type: ignore[operator]
        assert queue.pop() is None
        clock.advance(0.001)
    assert delays == [1, 2, 4, 8, 10, 10, 10]
    assert queue.entry("default/p").attempts == 7  # type: ignore[union-attr]


def test_counts_by_place() -> None:
    clock = FakeClock()
    queue = SchedulingQueue(clock=clock)
    for name in ("a", "b", "c"):
        queue.add(make(name))  # type: ignore[arg-type]
    queue.pop()
    queue.pop()
    queue.backoff("default/b")
    assert queue.counts() == {"active": 1, "backoff": 1, "in_flight": 1}
    assert len(queue) == 3
    assert "default/a" in queue


def test_wake_retries_after_the_initial_backoff_only() -> None:
    clock = FakeClock()
    queue = SchedulingQueue(clock=clock)
    queue.add(make("p"))  # type: ignore[arg-type]
    for _ in range(4):  # backoff now 8 s
        queue.pop()
        delay = queue.backoff("default/p")
        clock.advance(delay)  # type: ignore[arg-type]
    queue.pop()
    assert queue.backoff("default/p") == 10
    clock.advance(0.5)
    queue.wake()
    assert queue.pop() is None  # not before 1 s since the last attempt
    assert queue.next_ready_in() == 0.5
    clock.advance(0.5)
    popped = queue.pop()
    assert popped is not None and popped.key == "default/p"


def test_wake_does_not_delay_a_pod_due_sooner() -> None:
    clock = FakeClock()
    queue = SchedulingQueue(clock=clock)
    queue.add(make("p"))  # type: ignore[arg-type]
    queue.pop()
    queue.backoff("default/p")  # 1 s
    queue.wake()
    assert queue.next_ready_in() == 1.0
    clock.advance(1.0)
    assert queue.pop() is not None


def test_a_woken_pod_goes_when_nothing_is_active_else_after_the_initial_backoff() -> None:
    """kube's SchedulerPopFromBackoffQ: a pod the filters rejected that a change may help is popped
    as soon as no active pod is ready; while others are, it waits its initial backoff since its last
    attempt, not 10 s."""
    clock = FakeClock()
    queue = SchedulingQueue(clock=clock)
    queue.add(make("p"))  # type: ignore[arg-type]
    for _ in range(4):  # backoff now 8 s
        queue.pop()
        delay = queue.backoff("default/p", rejectors=FIT)
        clock.advance(delay)  # type: ignore[arg-type]
    queue.pop()
    assert queue.backoff("default/p", rejectors=FIT) == 10
    assert queue.next_ready_in() == 10
    clock.advance(0.5)
    queue.wake()
    assert queue.next_ready_in() == 0.0
    assert queue.counts() == {"active": 0, "backoff": 1, "in_flight": 0}
    popped = queue.pop()  # nothing else to do: at once
    assert popped is not None and popped.key == "default/p"
    queue.backoff("default/p", rejectors=FIT)
    queue.add(make("busy", 100))  # type: ignore[arg-type]
    clock.advance(0.5)
    queue.wake()
    assert [p.key for p in (queue.pop(), queue.pop())] == ["default/busy", "default/p"]  # type: ignore[union-attr]
    queue.backoff("default/p", rejectors=FIT)
    for name in ("x", "y"):
        queue.add(make(name))  # type: ignore[arg-type]
    queue.wake()
    clock.advance(1.0)  # now due as an active pod: in priority order with the others
    assert drain(queue) == ["default/p", "default/x", "default/y"]


def test_removal_while_queued_waiting_or_in_flight() -> None:
    clock = FakeClock()
    queue = SchedulingQueue(clock=clock)
    for name in ("a", "b", "c"):
        queue.add(make(name))  # type: ignore[arg-type]
    queue.remove("default/a")
    assert drain(queue) == ["default/b", "default/c"]
    queue.backoff("default/b")
    queue.remove("default/b")
    queue.remove("default/c")  # in flight
    assert queue.next_ready_in() is None
    clock.advance(60)
    assert queue.pop() is None
    assert len(queue) == 0
    assert queue.backoff("default/b") is None
    # re-added after removal: a fresh entry, no stale heap entries resurface twice
    queue.add(make("a"))  # type: ignore[arg-type]
    assert drain(queue) == ["default/a"]
    assert queue.entry("default/a").attempts == 1  # type: ignore[union-attr]


def test_update_keeps_place_and_backoff_but_reorders_active_pods() -> None:
    clock = FakeClock()
    queue = SchedulingQueue(clock=clock)
    queue.add(make("a", 10))  # type: ignore[arg-type]
    queue.add(make("b", 5))  # type: ignore[arg-type]
    queue.add(make("b", 50))  # type: ignore[arg-type]  # priority raised while active
    assert drain(queue) == ["default/b", "default/a"]
    queue.backoff("default/a")
    queue.add(make("a", 99))  # type: ignore[arg-type]  # an update while waiting does not skip the backoff
    assert queue.pop() is None
    clock.advance(1)
    popped = queue.pop()
    assert popped is not None and popped.priority == 99


def test_retry_now_skips_the_backoff() -> None:
    clock = FakeClock()
    queue = SchedulingQueue(clock=clock)
    queue.add(make("p"))  # type: ignore[arg-type]
    queue.pop()
    queue.backoff("default/p")
    queue.retry_now("default/p")
    assert queue.pop() is not None
    queue.retry_now("default/unknown")  # ignored
    assert queue.pop() is None


def test_an_event_wakes_only_the_pods_it_may_help() -> None:
    clock = FakeClock()
    queue = SchedulingQueue(clock=clock)
    for name in ("short-of-cpu", "anti-affinity", "unknown"):
        queue.add(make(name))  # type: ignore[arg-type]
    for _ in range(4):  # three attempts each: backoff 4 s now
        for _ in range(3):
            queue.pop()
        queue.backoff("default/short-of-cpu", frozenset({"Node", "Pod/Delete"}))
        queue.backoff("default/anti-affinity", frozenset({"Node", "Pod"}))
        queue.backoff("default/unknown")
        clock.advance(8)
    for _ in range(3):
        queue.pop()
    queue.backoff("default/short-of-cpu", frozenset({"Node", "Pod/Delete"}))
    queue.backoff("default/anti-affinity", frozenset({"Node", "Pod"}))
    queue.backoff("default/unknown")  # any event may help it
    clock.advance(1.0)
    queue.wake("Pod/Add")  # a pod appeared: no more room anywhere, a peer may have arrived
    assert sorted(drain(queue)) == ["default/anti-affinity", "default/unknown"]
    queue.wake("Pod/Delete")
    assert drain(queue) == ["default/short-of-cpu"]


def test_a_woken_pod_is_not_woken_twice_by_a_stream_of_events() -> None:
    clock = FakeClock()
    queue = SchedulingQueue(clock=clock)
    queue.add(make("p"))  # type: ignore[arg-type]
    queue.pop()
    queue.backoff("default/p", frozenset({"Node/Update"}))
    queue.wake("Node/Add")  # not one it waits for
    assert queue.next_ready_in() == 1.0
    queue.wake("Node/Update")
    queue.wake("Node")  # any node event: still at most one retry after the initial backoff
    clock.advance(1.0)
    assert drain(queue) == ["default/p"]
    assert queue.pop() is None


def test_take_out_of_turn_as_pop_would() -> None:
    """kube's pod group cycle takes the group's other pending pods with the one popped: each is in
    flight (never popped again meanwhile), counts an attempt, and backs off from now."""
    clock = FakeClock()
    queue = SchedulingQueue(clock=clock)
    for name in ("a", "b", "c"):
        queue.add(make(name))  # type: ignore[arg-type]
    popped = queue.pop()
    assert popped is not None and popped.key == "default/a"
    assert queue.take("default/a") is None  # in flight already
    queue.backoff("default/b")  # (never attempted: ready at once) then taken from the backoff
    taken = queue.take("default/b")
    assert taken is not None and taken.key == "default/b"
    assert queue.take("default/zz") is None
    assert queue.counts() == {"active": 1, "backoff": 0, "in_flight": 2}
    assert drain(queue) == ["default/c"]  # b's stale heap entries are skipped
    clock.advance(5)
    assert queue.backoff("default/b") == 1  # its first attempt: 1 s from the take, not from -inf
    assert queue.next_ready_in() == 0.0
    queue.wake()  # a wake does not bring back a pod in flight
    assert queue.entry("default/b").attempts == 1  # type: ignore[union-attr]


def test_wake_pod_retries_that_pod_alone_after_the_initial_backoff() -> None:
    """The pod's own update that may help it (its generated ResourceClaim recorded): only it is woken,
    whatever events it was waiting for, and (no filter rejected it) never sooner than the initial
    backoff."""
    clock = FakeClock()
    queue = SchedulingQueue(clock=clock)
    for name in ("p", "q"):
        queue.add(make(name))  # type: ignore[arg-type]
    for _ in range(4):  # backoff now 8 s for both
        for _ in range(2):
            queue.pop()
        for key in ("default/p", "default/q"):
            delay = queue.backoff(key, frozenset({"ResourceClaim"}))
        clock.advance(delay)  # type: ignore[arg-type]
    queue.pop(), queue.pop()
    queue.backoff("default/p", frozenset({"ResourceClaim"}))
    queue.backoff("default/q", frozenset({"ResourceClaim"}))
    queue.wake_pod("default/p")
    queue.wake_pod("default/absent")  # (not queued: nothing happens)
    assert queue.next_ready_in() == 1.0
    clock.advance(1.0)
    assert drain(queue) == ["default/p"]
    queue.wake_pod("default/p")  # in flight: nothing to do
    assert queue.entry("default/p").state == "in_flight"  # type: ignore[union-attr]
    queue.wake("ResourceClaim")  # q is still interested in its events
    clock.advance(0.0)
    assert drain(queue) == ["default/q"]


def test_wake_pod_moves_that_pod_alone() -> None:
    """As the test above, for a pod the filters rejected: popped at once when nothing else is ready."""
    clock = FakeClock()
    queue = SchedulingQueue(clock=clock)
    for name in ("p", "q"):
        queue.add(make(name))  # type: ignore[arg-type]
    for _ in range(4):  # backoff now 8 s for both
        for _ in range(2):
            queue.pop()
        for key in ("default/p", "default/q"):
            delay = queue.backoff(key, frozenset({"ResourceClaim"}), rejectors=FIT)
        clock.advance(delay)  # type: ignore[arg-type]
    queue.pop(), queue.pop()
    queue.backoff("default/p", frozenset({"ResourceClaim"}), rejectors=FIT)
    queue.backoff("default/q", frozenset({"ResourceClaim"}), rejectors=FIT)
    queue.wake_pod("default/p")
    queue.wake_pod("default/absent")  # (not queued: nothing happens)
    assert queue.next_ready_in() == 0.0
    assert drain(queue) == ["default/p"]
    queue.wake_pod("default/p")  # in flight: nothing to do
    assert queue.entry("default/p").state == "in_flight"  # type: ignore[union-attr]
    queue.wake("ResourceClaim")  # q is still interested in its events
    assert drain(queue) == ["default/q"]
