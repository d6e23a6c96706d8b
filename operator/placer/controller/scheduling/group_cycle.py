"""The pod group cycle (kube v1.36's `podGroupCycle`): the scheduling cycle of a pod of a group, which
decides every pending pod of the group together on one snapshot (`engine.gang.decide_group`).

When the loop pops a pod of a group, the group's other pending pods are taken from the queue too
(`SchedulingQueue.take`, wherever they wait), and the group is decided as one unit:

- **placed**: the pods that fit are assumed already (their room and their plugins' reservations
  held); each goes through Permit (e.g. `GangScheduling`, which holds a gang's pods until
  `minCount` are assumed or bound) and its binding cycle, as any pod's. The first takes the loop's
  bind slot, the others wait for one. Members that did not fit (extras beyond `minCount`) get
  their own FailedScheduling and back off;
- **unschedulable**: nothing is held; each pod gets `PodScheduled=False, reason=Unschedulable` and a
  FailedScheduling event with its message (its own nodes' reasons, or that the gang lacks
  `minCount` feasible pods) and backs off until an event that may help, a new member or a change
  of its PodGroup;
- **preempting**: every pod of the gang is nominated to its node and the victims on that node are
  evicted, as `placer.controller.scheduling.preemption` does for one pod (victims elsewhere go with the first
  pod); the pods back off until a victim is gone, and the next group cycle finds the room;
- **error** (members naming different schedulers; or, the group's condition then False/`SchedulerError`,
  a placement plugin's, e.g. its scheduled pods in two topology domains): `reason=SchedulerError`, backoff;
- **waiting** (the group was deleted, or lost members, since its pods were queued): they are held
  again (`placer.controller.informers.groups`), with no event.

Then the group's status condition is written (`GroupMembers.report`). Never is part of a gang
bound while the rest is left pending: either `minCount` are assumed and bound, or none.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from placer.controller.scheduling.preemption import VICTIM_GONE, keeps_nomination
from placer.engine.framework import ClusterEvent, Preemption
from placer.engine.gang import GroupDecision, Outcome, decide_group
from placer.engine.groups import COSCHEDULING_KIND, POD_GROUP_KIND, GroupRef
from placer.engine.objects import PodInfo
from placer.engine.profile import Profile
from placer.engine.runtime import Decision

if TYPE_CHECKING:
    from placer.controller.scheduling.loop import SchedulingLoop

__all__ = ["GROUP_EVENTS", "GroupCycle"]

logger = logging.getLogger("placer.loop")

#: what may let a group that could not be placed go: a new member, its PodGroup changed
GROUP_EVENTS = frozenset({ClusterEvent.POD_ADD, POD_GROUP_KIND, COSCHEDULING_KIND})


class GroupCycle:
    def __init__(self, loop: SchedulingLoop) -> None:
        self.loop = loop
        self.state = loop.state

    def run(self, pod: PodInfo, ref: GroupRef, profile: Profile) -> bool:
        """The group cycle of `pod`'s group; True when a binding cycle took the loop's bind slot."""
        state = self.state
        members = state.groups
        loop = self.loop
        others = [other for other in members.others(ref, pod.key)
                  if other.key not in state.cluster.pods and other.key not in state.cache.gated]
        if any(loop.preemptions.running(other.key) for other in others):
            loop.preemptions.hold_back(pod.key)  # the gang's victims are being evicted: not yet
            return False
        pods = [pod]
        for other in others:
            if state.profiles.active(other.scheduler_name) is None:
                continue
            taken = state.queue.take(other.key)
            if taken is not None:
                pods.append(taken)
        started = time.perf_counter()
        try:
            decision = decide_group(state.scheduler, profile, state.cluster, ref, pods,
                                    top=3 if loop.debug else 0, members=members.members(ref))
        except Exception:
            logger.exception("deciding the group %s failed", ref.key)
            for member in pods:
                state.queue.backoff(member.key)
            loop._observe(profile, "error", started)
            return False
        outcome = decision.outcome
        by_key = {member.key: member for member in pods}
        if outcome is Outcome.WAITING:
            members.hold(pods)
            return False
        loop._observe(profile, {Outcome.PLACED: "scheduled", Outcome.ERROR: "error"}.get(outcome, "unschedulable"),
                      started)
        members.report(decision)  # nothing for an error before the cycle (its condition is None)
        if loop.debug:
            logger.debug("group %s (%d pods, profile %s): %s %s", ref.key, len(pods), profile.name, outcome.value,
                         decision.message)
        if outcome is Outcome.PLACED:
            return self._placed(decision, by_key, profile)
        if outcome is Outcome.PREEMPTING:
            self._preempting(decision, by_key, profile)
            return False
        for member, member_decision in zip(decision.pods, decision.decisions, strict=True):
            self._unplaced(member, member_decision, profile, decision)
        return False

    def _placed(self, decision: GroupDecision, pods: dict[str, PodInfo], profile: Profile) -> bool:
        state = self.state
        loop = self.loop
        slot = True  # the loop's bind slot, for the first pod bound at once
        for member, member_decision in zip(decision.pods, decision.decisions, strict=True):
            if member_decision.node is None:
                self._unplaced(member, member_decision, profile, decision)
                continue
            state.nominations.unnominate(member.key, now_on=member_decision.node)
            if not loop.permit(member, profile, member_decision):
                continue
            if loop.binding.start(member, member_decision, profile, slot=slot):
                slot = False
        state.queue.wake(ClusterEvent.POD_ADD)  # e.g. a pod with affinity to these may go now
        return not slot

    def _unplaced(self, pod: PodInfo, decision: Decision, profile: Profile, group: GroupDecision) -> None:
        """A pod of the group left pending: its FailedScheduling (or SchedulerError), then backoff."""
        state = self.state
        key = pod.key
        if group.outcome is Outcome.ERROR:
            state.queue.backoff(key)
            state.reporter.failed(pod, profile.scheduler_name, decision.message or group.message,
                                  reason="SchedulerError")
            return
        if not keeps_nomination(decision):
            had = state.nominations.unnominate(key)
            if had or pod.nominated_node:
                self.loop.preemptions.clear(pod)
        state.queue.backoff(key, decision.wake_on | GROUP_EVENTS if decision.wake_on else frozenset())
        message = decision.full_message or group.message or "unschedulable"
        state.reporter.failed(pod, profile.scheduler_name, message)

    def _preempting(self, decision: GroupDecision, pods: dict[str, PodInfo], profile: Profile) -> None:
        """Each pod nominated to its node, the victims there evicted (by the preemption tasks)."""
        state = self.state
        for member, member_decision in zip(decision.pods, decision.decisions, strict=True):
            if member_decision.node is None:  # (an extra beyond minCount: it does not preempt)
                self._unplaced(member, member_decision, profile, decision)
                continue
            if member_decision.preemption is None:
                member_decision.preemption = Preemption(member_decision.node, ())
            message = member_decision.full_message or decision.message
            wake = member_decision.wake_on | VICTIM_GONE | GROUP_EVENTS if member_decision.wake_on else frozenset()
            state.queue.backoff(member.key, wake)
            self.loop.preemptions.begin(member, profile, member_decision, message)
            state.reporter.failed(member, profile.scheduler_name, message, condition=False)
