"""Private temporary files for what TLS and Kopf take only as files: a kubeconfig's `-data`
certificates and keys, an exec plugin's client certificate. Each is mode 0600, one per content (the
same certificate read twice is one file), and removed when the process exits."""

from __future__ import annotations

import atexit
import contextlib
import os

__all__ = ["discard_private_file", "private_file"]

_FILES: dict[bytes, str] = {}
_CLEANUP: list[bool] = []  # [True] once the removal at exit is registered


def _remove_all() -> None:
    for name in _FILES.values():
        with contextlib.suppress(OSError):
            os.remove(name)
    _FILES.clear()


def private_file(content: bytes, prefix: str = "placer-kubeconfig-") -> str:
    """A file (mode 0600) holding `content`, one per content, removed at exit."""
    name = _FILES.get(content)
    if name is not None and os.path.isfile(name):
        return name
    if not _CLEANUP:
        atexit.register(_remove_all)
        _CLEANUP.append(True)
    import tempfile  # (here: with shutil and lzma, ~5 ms of a start whose kubeconfig names its files)

    descriptor, name = tempfile.mkstemp(prefix=prefix)
    with os.fdopen(descriptor, "wb") as file:
        file.write(content)
    _FILES[content] = name
    return name


def discard_private_file(name: str) -> None:
    """Remove a file `private_file` made whose content turned out unusable."""
    for content, known in list(_FILES.items()):
        if known == name:
            del _FILES[content]
            with contextlib.suppress(OSError):
                os.remove(name)
