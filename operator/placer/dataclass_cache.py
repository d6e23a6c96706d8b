"""The code `@dataclass` generates, compiled once and kept beside Placer's bytecode (issue 25).

Python 3.11's `dataclasses` writes every method it adds to a class (`__init__`, `__repr__`, `__eq__`,
`__hash__`, a frozen class's `__setattr__` and `__delattr__`) as source text and compiles it while
the class's module is imported. `placer run` imports about 160 dataclasses before its first
decision (Placer's records, pydantic's, annotated_types'): some 720 compiles, about 0.1 s of the
0.5 s of CPU a cold start spends before the first binding. Python keeps compiled modules in
`__pycache__`; this keeps the compiled methods there too.

- The key is the exact source text dataclasses wrote, so a changed class is compiled afresh and
  an entry can never stand for other code. Compiling is what `exec(text)` does in `dataclasses`
  (file name `<string>`, no inherited `__future__` flags).
- Only `dataclasses`' own calls go through it: `install()` gives that module a global `exec` (its
  single use is `_create_fn`'s); every other `exec` in the process is the builtin.
- The file is `placer/__pycache__/dataclasses.<cache tag>.marshal` (under PYTHONPYCACHEPREFIX
  when set, as the `.pyc` files), headed by the interpreter's bytecode magic number: another
  interpreter's file is ignored, as another's `.pyc` files are. It carries what one process used
  (entries of classes since changed drop out), and is written whole under a temporary name, then
  renamed, so a reader never sees half of one.
- `placer run` saves it after its imports when it compiled anything anew (not under
  PYTHONDONTWRITEBYTECODE, as Python writes no `.pyc` then; a read-only installation is left
  alone). The container image writes it at build time: `python -m placer.precompile`.

Loading it costs about 5 ms; it is trusted as the `.pyc` files beside it are (same directory).
Once `placer run` has imported Kopf's side too, the tables are dropped (`release`: the table read
takes about 2 MB, source texts included; what the classes' methods do not hold is freed).
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import importlib.util
import marshal
import os
import sys
from pathlib import Path
from types import CodeType
from typing import Any

__all__ = ["CodeCache", "cache_path", "install", "release", "save"]

#: changes when the file's layout does
FORMAT = b"placer-dataclasses-1\n"


def cache_path() -> Path | None:
    """Where this interpreter's cache lives: beside this module's `.pyc` (so under
    PYTHONPYCACHEPREFIX when that is set); None when the interpreter keeps no bytecode cache."""
    try:
        pyc = Path(importlib.util.cache_from_source(__file__))
    except NotImplementedError:  # sys.implementation.cache_tag is None
        return None
    return pyc.with_name(f"dataclasses.{sys.implementation.cache_tag}.marshal")


class CodeCache:
    """Compiled `dataclasses` sources by text: those read from the file, and those this process used."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.stored: dict[str, CodeType] = self._read(path) if path is not None else {}
        self.used: dict[str, CodeType] = {}
        self.compiled = 0  # sources this process compiled anew (not in the file)

    @staticmethod
    def _read(path: Path) -> dict[str, CodeType]:
        header = FORMAT + importlib.util.MAGIC_NUMBER
        try:
            data = path.read_bytes()
        except OSError:
            return {}
        if not data.startswith(header):
            return {}
        try:
            table = marshal.loads(memoryview(data)[len(header):])
        except (EOFError, ValueError, TypeError):  # truncated or not ours: compile afresh
            return {}
        if not isinstance(table, dict):
            return {}
        return {text: code for text, code in table.items() if isinstance(text, str) and isinstance(code, CodeType)}

    def code(self, text: str) -> CodeType:
        """The compiled `text`, as `exec(text)` in `dataclasses` would compile it."""
        code = self.used.get(text)
        if code is None:
            code = self.stored.get(text)
            if code is None:
                code = compile(text, "<string>", "exec", dont_inherit=True)
                self.compiled += 1
            self.used[text] = code
        return code

    def exec(self, source: Any, globals: Any = None, locals: Any = None, /) -> None:
        """`dataclasses`' `exec`: its generated source through the cache, anything else as given."""
        if isinstance(source, str):
            source = self.code(source)
        if globals is None:  # as the builtin: the caller's globals (dataclasses always passes its own)
            globals = sys._getframe(1).f_globals
        builtins.exec(source, globals, locals)

    def save(self, *, force: bool = False) -> bool:
        """Write what this process used, when it compiled anything anew (or `force`); False when
        nothing was written: nothing new, PYTHONDONTWRITEBYTECODE, or the directory is read-only."""
        if self.path is None or not (self.compiled or force) or (sys.dont_write_bytecode and not force):
            return False
        data = FORMAT + importlib.util.MAGIC_NUMBER + marshal.dumps(dict(self.used))
        temporary = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            temporary.write_bytes(data)
            os.replace(temporary, self.path)
        except OSError:
            with contextlib.suppress(OSError):
                temporary.unlink()
            return False
        self.compiled = 0  # (what the file held stays at hand: a later import step may use it)
        return True


    def release(self) -> None:
        """Drop the tables (the source texts and what the file held beyond this process's use):
        `placer run` is done importing. A class made later compiles its methods, as without a
        cache, and nothing more is saved."""
        self.path = None
        self.stored, self.used = {}, {}


_installed: CodeCache | None = None


def install(path: Path | None = None) -> CodeCache:
    """Route `dataclasses`' compiles through a cache read from `path` (default: `cache_path()`).
    Once per process: later calls return the cache installed first."""
    global _installed
    if _installed is None:
        _installed = CodeCache(cache_path() if path is None else path)
        dataclasses.exec = _installed.exec  # type: ignore[attr-defined]  # shadows the builtin there only
    return _installed


def save(*, force: bool = False) -> bool:
    """`CodeCache.save` of the installed cache (False when none is installed)."""
    return _installed.save(force=force) if _installed is not None else False


def release() -> None:
    """`CodeCache.release` of the installed cache, if any."""
    if _installed is not None:
        _installed.release()
