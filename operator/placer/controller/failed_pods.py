"""A watch of the pods that go `Failed` on a node, for `placer.controller.kubelet_rejections`.

The pod watch selects active pods, as kube-scheduler's informer: a pod that ends leaves the
selection and comes as DELETED with its content from before (what a real API server sends), so it
never tells why the pod ended. This watch selects `status.phase=Failed,spec.nodeName!=`: a pod
entering it (a kubelet's refusal among others) comes as ADDED with its status. It needs no LIST (the
pods failed before are of no interest): it starts from where the pod watch resumed, and when the
server no longer has that history it starts again from the pod watch's latest resourceVersion (the
failures in between are missed: reporting them is best effort, the accounting never depended on it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from placer.controller.informers import Informer
from placer.controller.state import SchedulerState

__all__ = ["FAILED_PODS_SELECTOR", "FailedPodWatch"]

logger = logging.getLogger("placer.informers")

FAILED_PODS_SELECTOR = "status.phase=Failed,spec.nodeName!="


class FailedPodWatch(Informer):
    def __init__(self, state: SchedulerState) -> None:
        super().__init__(state, "pods", self._event, [("fieldSelector", FAILED_PODS_SELECTOR)])
        self._versions: dict[str, str] = {}

    @property
    def versions(self) -> dict[str, str]:
        return self._versions

    async def run(self) -> None:
        pods = self.state.resync.watch_versions["pods"]
        while not pods:  # the first resync lists the pods and says from where their watch resumes
            await self.state.resync.resynced.wait()
        self._versions.update(pods)
        await asyncio.gather(*(self._follow(path) for path in list(self._versions)))

    async def _relist(self, path: str) -> None:
        logger.info("the failed pods' watch on %s expired: following from the pod watch's position", path)
        self._versions[path] = self.state.resync.watch_versions["pods"].get(path, "")

    def _event(self, event: Mapping[str, Any]) -> None:
        if event.get("type") == "ADDED":  # (a MODIFIED Failed pod, or one deleted, was seen entering)
            self.state.kubelet_rejections.failed(event["object"])
