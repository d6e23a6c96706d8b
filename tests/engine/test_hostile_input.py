"""The hostile-input corpus against the engine: every bad profile is a ProfileError naming the
plugin and field, every bad pod is an unschedulable decision naming the field, nothing raises,
and valid neighbours are still placed."""

from __future__ import annotations

import pytest
from placer.engine.parsing import parse_pod
from placer.engine.profile import ProfileError, compile_profile
from placer.engine.runtime import Scheduler
from placer.testing import cluster_of, node

from tests.engine.hostile_corpus import POD_CASES, PROFILE_CASES, PodCase, ProfileCase


def test_the_corpus_is_large_enough() -> None:
    assert len(PROFILE_CASES) + len(POD_CASES) >= 30


@pytest.mark.parametrize("case", PROFILE_CASES, ids=lambda c: c.id)
def test_profile(case: ProfileCase) -> None:
    if case.error is None:
        assert compile_profile("hostile", case.spec).scheduler_name.startswith("hostile")
        return
    with pytest.raises(ProfileError) as raised:
        compile_profile("hostile", case.spec)
    message = str(raised.value)
    assert message.startswith('profile "hostile": ')
    assert raised.value.reason == case.reason
    for part in case.error:
        assert part in message


@pytest.mark.parametrize("case", POD_CASES, ids=lambda c: c.id)
def test_pod(case: PodCase) -> None:
    cluster = cluster_of([node("a", cpu="4", memory="8Gi")])
    profile = compile_profile("hostile", {"schedulerName": "placer"})
    scheduler = Scheduler()
    bad = parse_pod({"metadata": {"name": case.id, "namespace": "ns", **case.metadata},
                     "spec": {"schedulerName": "placer", **case.spec}})
    good = parse_pod({"metadata": {"name": "good", "namespace": "ns"},
                      "spec": {"schedulerName": "placer", "containers": [{"name": "c", "image": "i"}]}})
    decision = scheduler.schedule(bad, profile, cluster)
    if case.error is None:
        assert decision.node == "a"
    else:
        assert decision.node is None
        assert decision.message is not None and decision.message.startswith(f"invalid pod ns/{case.id}: ")
        for part in case.error:
            assert part in decision.message
    assert scheduler.schedule(good, profile, cluster).node == "a"
