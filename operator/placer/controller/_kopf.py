"""Kopf, imported without kubernetes_asyncio's generated client: `from placer.controller._kopf import kopf`.

Kopf supports the official clients' model objects where it accepts a body (`kopf.adopt`,
`kopf.label`, ...): `kopf._cogs.helpers.thirdparty` tries `from kubernetes_asyncio.client import
V1ObjectMeta, V1OwnerReference` at import time, and uses dummies when that raises ImportError (the
library not installed). Here it is installed (for exec plugins and auth providers, see
`placer.controller.transport.kubeconfig`), and that one import loads its whole generated client, some 700
model modules: about 0.35 s of a cold start, before Placer could list anything.

Placer never hands Kopf a kubernetes_asyncio model (its handlers get raw dicts, it passes Kopf no
objects), so Kopf is imported while `sys.modules["kubernetes_asyncio"]` is None, which Python's
import system documents as "import raises ModuleNotFoundError" (the state of a machine without the
library); the entry is removed right after, so a later `import kubernetes_asyncio` (an exec-plugin
kubeconfig) loads the library as usual. Kopf's isinstance checks for those models go by module
name and keep working. If kubernetes_asyncio or Kopf is already imported (tests, a host program),
nothing changes.

Every Placer module imports Kopf from here, not directly, so the first import is this one.
"""

from __future__ import annotations

import importlib
import sys

__all__ = ["HIDDEN", "kopf"]

HIDDEN = ("kubernetes_asyncio",)  # optional libraries Kopf probes at import time


def _import_kopf() -> None:
    if "kopf" in sys.modules:
        return
    hidden = [name for name in HIDDEN if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # documented: the import raises
    try:
        importlib.import_module("kopf")
    finally:
        for name in hidden:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


_import_kopf()

import kopf  # noqa: E402  # already loaded by `_import_kopf`: a lookup in sys.modules
