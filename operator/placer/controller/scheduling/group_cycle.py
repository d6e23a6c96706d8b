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
from collections.abc import Callable, Collection

from placer.controller.binding.cycle import BindingCycles
from placer.controller.binding.group_status import GroupStatusWriter
from placer.controller.binding.reporting import Reporter
from placer.controller.informers.groups import GroupMembers
from placer.controller.informers.nominations import Nominations
from placer.controller.scheduling.preemption import VICTIM_GONE, Preemptions, keeps_nomination
from placer.engine.cluster import ClusterState
from placer.engine.framework import ClusterEvent, Preemption
from placer.engine.gang import GroupDecision, Outcome, decide_group
from placer.engine.groups import COSCHEDULING_KIND, POD_GROUP_KIND, GroupRef
from placer.engine.objects import PodInfo
from placer.engine.profile import Profile
from placer.engine.queue import SchedulingQueue
from placer.engine.runtime import Decision, Scheduler

__all__ = ["GROUP_EVENTS", "GroupCycle"]

logger = logging.getLogger("placer.loop")

#: what may let a group that could not be placed go: a new member, its PodGroup changed
GROUP_EVENTS = frozenset({ClusterEvent.POD_ADD, POD_GROUP_KIND, COSCHEDULING_KIND})


class GroupCycle:
    def __init__(
        self,
        scheduler: Scheduler,
        cluster: ClusterState,
        queue: SchedulingQueue,
        *,
        members: GroupMembers,
        group_status: GroupStatusWriter,
        gated: Collection[str],
        active: Callable[[str], Profile | None],
        nominations: Nominations,
        reporter: Reporter,
        preemptions: Preemptions,
        binding: BindingCycles,
        permit: Callable[[PodInfo, Profile, Decision], bool],
        observe: Callable[[Profile, str, float], None],
        debug: bool = False,
    ) -> None:
        self.scheduler = scheduler
        self.cluster = cluster
        self.queue = queue
        self.members = members
        self.group_status = group_status
        self.gated = gated  # pending pods with scheduling gates (the cache's)
        self.active = active
        self.nominations = nominations
        self.reporter = reporter
        self.preemptions = preemptions
        self.binding = binding
        self.permit = permit  # the scheduling loop's Permit, run for each placed member
        self.observe = observe  # the attempt's metrics
        self.debug = debug

    def run(self, pod: PodInfo, ref: GroupRef, profile: Profile) -> bool:
        """The group cycle of `pod`'s group; True when a binding cycle took the loop's bind slot."""
        members = self.members
        others = [other for other in members.others(ref, pod.key)
                  if other.key not in self.cluster.pods and other.key not in self.gated]
        if any(self.preemptions.running(other.key) for other in others):
            self.preemptions.hold_back(pod.key)  # the gang's victims are being evicted: not yet
            return False
        pods = [pod]
        for other in others:
            if self.active(other.scheduler_name) is None:
                continue
            taken = self.queue.take(other.key)
            if taken is not None:
                pods.append(taken)
        started = time.perf_counter()
        try:
            decision = decide_group(self.scheduler, profile, self.cluster, ref, pods,
                                    top=3 if self.debug else 0, members=members.members(ref))
        except Exception:
            logger.exception("deciding the group %s failed", ref.key)
            for member in pods:
                self.queue.backoff(member.key)
            self.observe(profile, "error", started)
            return False
        outcome = decision.outcome
        by_key = {member.key: member for member in pods}
        if outcome is Outcome.WAITING:
            for member in pods:
                self.queue.remove(member.key)
            members.hold(pods)
            return False
        self.observe(profile, {Outcome.PLACED: "scheduled", Outcome.ERROR: "error"}.get(outcome, "unschedulable"),
                      started)
        self.group_status.report(decision)  # nothing for an error before the cycle (its condition is None)
        if self.debug:
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
        slot = True  # the loop's bind slot, for the first pod bound at once
        for member, member_decision in zip(decision.pods, decision.decisions, strict=True):
            if member_decision.node is None:
                self._unplaced(member, member_decision, profile, decision)
                continue
            self.nominations.unnominate(member.key, now_on=member_decision.node)
            if not self.permit(member, profile, member_decision):
                continue
            if self.binding.start(member, member_decision, profile, slot=slot):
                slot = False
        self.queue.wake(ClusterEvent.POD_ADD)  # e.g. a pod with affinity to these may go now
        return not slot

    def _unplaced(self, pod: PodInfo, decision: Decision, profile: Profile, group: GroupDecision) -> None:
        """A pod of the group left pending: its FailedScheduling (or SchedulerError), then backoff."""
        key = pod.key
        if group.outcome is Outcome.ERROR:
            self.queue.backoff(key)
            self.reporter.failed(pod, profile.scheduler_name, decision.message or group.message,
                                  reason="SchedulerError")
            return
        if not keeps_nomination(decision):
            had = self.nominations.unnominate(key)
            if had or pod.nominated_node:
                self.preemptions.clear(pod)
        self.queue.backoff(key, decision.wake_on | GROUP_EVENTS if decision.wake_on else frozenset())
        message = decision.full_message or group.message or "unschedulable"
        self.reporter.failed(pod, profile.scheduler_name, message)

    def _preempting(self, decision: GroupDecision, pods: dict[str, PodInfo], profile: Profile) -> None:
        """Each pod nominated to its node, the victims there evicted (by the preemption tasks)."""
        for member, member_decision in zip(decision.pods, decision.decisions, strict=True):
            if member_decision.node is None:  # (an extra beyond minCount: it does not preempt)
                self._unplaced(member, member_decision, profile, decision)
                continue
            if member_decision.preemption is None:
                member_decision.preemption = Preemption(member_decision.node, ())
            message = member_decision.full_message or decision.message
            wake = member_decision.wake_on | VICTIM_GONE | GROUP_EVENTS if member_decision.wake_on else frozenset()
            self.queue.backoff(member.key, wake)
            self.preemptions.begin(member, profile, member_decision, message)
            self.reporter.failed(member, profile.scheduler_name, message, condition=False)
