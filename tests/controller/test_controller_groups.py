"""The groups in the operator's cache (`placer.controller.informers.groups`), driven by hand: members
held while their group waits (kube's GangScheduling PreEnqueue), released together when the PodGroup
comes or the last member is added, held again when the group is gone; the group's status write
(`placer.controller.binding.group_status`)."""

from __future__ import annotations

from typing import Any

from placer.controller.binding.group_status import GroupStatusWriter
from placer.engine.catalog import Catalog
from placer.engine.gang import GroupDecision, Outcome
from placer.engine.groups import POD_GROUP_KIND, POD_GROUP_V1ALPHA2, GroupRef, lookup

from tests.controller.helpers import node, pod, profile, unit_state

REF = GroupRef(POD_GROUP_KIND, "default", "pg")


def member(name: str, **kwargs: Any) -> dict[str, Any]:
    return pod(name, spec={"schedulingGroup": {"podGroupName": "pg"}}, **kwargs)


def podgroup(min_count: int, rv: str = "5") -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
            "metadata": {"name": "pg", "namespace": "default", "resourceVersion": rv, "generation": 1, "uid": "u"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}}


def test_members_wait_for_their_group_then_go_together() -> None:
    state = unit_state()
    state.profile_feed.upsert(profile("p", "placer"))
    state.cache.observe_node(node("n1"))
    state.cache.observe_pod(member("a"))
    state.cache.observe_pod(member("b"))
    state.cache.observe_pod(pod("solo"))
    assert "default/solo" in state.queue
    assert "default/a" not in state.queue and state.groups.held == {"default/a", "default/b"}
    state.cluster.catalog.put(POD_GROUP_KIND, "default", "pg", POD_GROUP_V1ALPHA2.parse(podgroup(3)))
    state.cache.release_group(REF)  # (what the PodGroup's informer does)
    assert "default/a" not in state.queue  # 2 pods of a gang of 3: still waiting
    state.cache.observe_pod(member("c"))  # the third completes the quorum: all three queued
    assert {"default/a", "default/b", "default/c"} <= set(state.queue._entries)
    assert state.groups.held == set() and state.groups.members(REF) == 3
    state.cache.pod_deleted(member("c"))
    assert state.groups.members(REF) == 2


def test_a_gated_member_counts_but_is_not_queued() -> None:
    state = unit_state()
    state.profile_feed.upsert(profile("p", "placer"))
    state.cluster.catalog.put(POD_GROUP_KIND, "default", "pg", POD_GROUP_V1ALPHA2.parse(podgroup(2)))
    state.cache.observe_pod(pod("gated", spec={"schedulingGroup": {"podGroupName": "pg"},
                                               "schedulingGates": [{"name": "x"}]}))
    state.cache.observe_pod(member("a"))
    assert "default/a" in state.queue and "default/gated" not in state.queue


async def test_the_group_condition_is_written_with_a_precondition_and_retried_on_409() -> None:
    writes: list[Any] = []

    class Kube:
        async def write(self, write: Any) -> Any:
            writes.append(write)
            from placer.controller.transport.client import Reply
            return Reply(409 if len(writes) == 1 else 200, b"{}")

        async def get_object(self, ref: Any, retries: int | None = None) -> Any:
            import json

            from placer.controller.transport.client import Reply
            return Reply(200, json.dumps(podgroup(2, rv="9")).encode())

    catalog = Catalog()
    writer = GroupStatusWriter(Kube(), catalog, lambda: True)
    group = POD_GROUP_V1ALPHA2.parse(podgroup(2))
    catalog.put(POD_GROUP_KIND, "default", "pg", group)
    assert lookup(catalog, REF) is group
    writer.report(GroupDecision(REF, group, Outcome.PLACED))
    for task in writer.tasks:
        await task
    assert [w.resource_version for w in writes] == ["5", "9"]
    body = writes[-1].body()
    assert body["metadata"]["resourceVersion"] == "9"
    (condition,) = body["status"]["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == ("PodGroupScheduled", "True", "Scheduled")
    assert writes[-1].target.path("status") == "/apis/scheduling.k8s.io/v1alpha2/namespaces/default/podgroups/pg/status"
