"""placer.dataclass_cache: the methods `@dataclass` generates, compiled once and read back."""

from __future__ import annotations

import builtins
import dataclasses
import importlib.util
import marshal
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import CodeType
from typing import Any, ClassVar

import pytest
from placer import dataclass_cache
from placer.dataclass_cache import FORMAT, CodeCache

METHODS = ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__")


def _make_classes() -> tuple[type, type]:
    """Two dataclasses with most of what dataclasses generates code for (frozen, slots, defaults,
    factories, ClassVar, InitVar, keyword-only fields, string annotations)."""

    @dataclasses.dataclass(frozen=True, slots=True)
    class Frozen:
        name: str
        count: int = 0
        tags: tuple[str, ...] = ()
        shared: ClassVar[int] = 3
        _: dataclasses.KW_ONLY
        weight: float = 1.5

    @dataclasses.dataclass(order=True)
    class Mutable:
        seen: list[str] = dataclasses.field(default_factory=list)
        hidden: int = dataclasses.field(default=7, repr=False, compare=False)
        seed: dataclasses.InitVar[int] = 0

        def __post_init__(self, seed: int) -> None:
            self.seen.append(str(seed))

    return Frozen, Mutable


def _codes(code: CodeType) -> Iterator[CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, CodeType):
            yield from _codes(const)


def _shape(code: CodeType) -> list[tuple[Any, ...]]:
    return [(c.co_code, c.co_names, c.co_varnames, c.co_freevars, c.co_flags, c.co_filename, c.co_name,
             c.co_firstlineno, [k for k in c.co_consts if not isinstance(k, CodeType)]) for c in _codes(code)]


@pytest.fixture
def builtin_exec(monkeypatch: pytest.MonkeyPatch) -> None:
    """`dataclasses` compiling as it does without Placer: with the builtin `exec`; and bytecode
    written, whatever PYTHONDONTWRITEBYTECODE says here."""
    monkeypatch.setattr(dataclasses, "exec", builtins.exec, raising=False)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)


def test_importing_placer_routes_dataclasses_through_the_cache() -> None:
    installed = dataclass_cache.install()
    assert dataclasses.exec == installed.exec  # type: ignore[attr-defined]
    assert dataclass_cache.install() is installed  # once per process

    @dataclasses.dataclass
    class Probe:
        probe_field_of_this_test: int

    assert any("probe_field_of_this_test" in text for text in installed.used)
    assert Probe(3).probe_field_of_this_test == 3


def test_cached_methods_are_the_code_dataclasses_compiles(builtin_exec: None, monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    """Compiled through the cache, from the file or afresh, each generated method is the very code
    the builtin `exec` makes: same bytecode, names, flags (no `__future__` flag of this module
    leaks in), annotations and defaults; and the classes behave the same."""
    plain = _make_classes()
    cache = CodeCache(tmp_path / "cache.marshal")
    monkeypatch.setattr(dataclasses, "exec", cache.exec, raising=False)
    fresh = _make_classes()
    assert cache.compiled > 0 and cache.save()
    reread = CodeCache(tmp_path / "cache.marshal")
    monkeypatch.setattr(dataclasses, "exec", reread.exec, raising=False)
    stored = _make_classes()
    assert reread.compiled == 0 and len(reread.used) == len(cache.used)  # every method read back
    for made in (fresh, stored):
        for ours, theirs in zip(made, plain, strict=True):
            for name in METHODS:
                mine, base = ours.__dict__.get(name), theirs.__dict__.get(name)
                assert (mine is None) == (base is None), name
                if mine is None or not hasattr(base, "__code__"):
                    continue
                assert _shape(mine.__code__) == _shape(base.__code__), name
                assert mine.__annotations__ == base.__annotations__, name
                assert (mine.__defaults__, mine.__kwdefaults__) == (base.__defaults__, base.__kwdefaults__), name
        frozen, mutable = made
        item = frozen("a", 2, weight=3.0)
        assert repr(item).endswith(".Frozen(name='a', count=2, tags=(), weight=3.0)")
        assert item == frozen("a", 2, weight=3.0) and hash(item) == hash(frozen("a", 2, weight=3.0))
        with pytest.raises(dataclasses.FrozenInstanceError):
            item.name = "b"  # type: ignore[misc]
        with pytest.raises(TypeError):
            frozen("a", 2, (), 3.0)  # weight is keyword-only
        assert mutable(seed=4).seen == ["4"] and mutable() < mutable(["z"])
        assert repr(mutable()).endswith(".Mutable(seen=['0'])")


def test_the_file_holds_what_one_process_used_and_is_replaced_whole(builtin_exec: None, monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    path = tmp_path / "sub" / "cache.marshal"
    old = CodeCache(path)
    old.code("def __create_fn__():\n def gone(self):\n  return 1\n return gone")  # a class since changed
    assert old.save() and path.read_bytes().startswith(FORMAT + importlib.util.MAGIC_NUMBER)
    cache = CodeCache(path)
    assert len(cache.stored) == 1
    monkeypatch.setattr(dataclasses, "exec", cache.exec, raising=False)
    _make_classes()
    assert cache.compiled > 0 and cache.save()  # compiled anew: saved
    assert any("gone" in text for text in cache.stored)  # what the file held stays at hand for a later step
    again = CodeCache(path)
    assert len(again.stored) == len(cache.used) and not any("gone" in text for text in again.stored)
    assert sorted(p.name for p in path.parent.iterdir()) == ["cache.marshal"]  # no temporary left behind
    nothing_new = CodeCache(path)
    monkeypatch.setattr(dataclasses, "exec", nothing_new.exec, raising=False)
    _make_classes()
    assert nothing_new.compiled == 0 and not nothing_new.save()  # nothing new: not written


@pytest.mark.parametrize("content", [
    b"",
    b"not ours at all",
    FORMAT + b"\x00\x00\r\n" + marshal.dumps({}),  # another interpreter's magic number
    FORMAT + importlib.util.MAGIC_NUMBER + marshal.dumps({"a": 1})[:-3],  # truncated
    FORMAT + importlib.util.MAGIC_NUMBER + marshal.dumps(["not", "a", "table"]),
])
def test_a_file_that_is_not_this_interpreters_cache_is_ignored(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "cache.marshal"
    path.write_bytes(content)
    cache = CodeCache(path)
    assert cache.stored == {}
    code = cache.code("def __create_fn__():\n def f(self):\n  return 2\n return f")
    assert cache.compiled == 1 and isinstance(code, CodeType)


def test_entries_that_are_not_code_are_dropped(tmp_path: Path) -> None:
    path = tmp_path / "cache.marshal"
    good = compile("x = 1", "<string>", "exec")
    path.write_bytes(FORMAT + importlib.util.MAGIC_NUMBER + marshal.dumps({"x = 1": good, "y = 2": "text", 3: good}))
    assert list(CodeCache(path).stored) == ["x = 1"]


def test_no_file_is_written_where_python_writes_no_bytecode(builtin_exec: None, monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path) -> None:
    cache = CodeCache(tmp_path / "cache.marshal")
    cache.code("def __create_fn__():\n def f(self):\n  return 3\n return f")
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert not cache.save() and not (tmp_path / "cache.marshal").exists()
    assert cache.save(force=True) and (tmp_path / "cache.marshal").exists()  # `python -m placer.precompile`
    blocked_dir = tmp_path / "a-file"  # where the directory should be (as a read-only installation: no write)
    blocked_dir.write_text("")
    blocked = CodeCache(blocked_dir / "cache.marshal")
    blocked.code("def __create_fn__():\n def f(self):\n  return 4\n return f")
    assert not blocked.save(force=True) and blocked_dir.read_text() == ""


def test_precompile_leaves_placer_run_nothing_to_compile(tmp_path: Path) -> None:
    """`python -m placer.precompile` (the image's build step) writes the file; a later process that
    imports what `placer run` imports compiles no dataclass method at all. Before it, one compiles
    hundreds."""
    env = {**os.environ, "PYTHONPYCACHEPREFIX": str(tmp_path / "pycache")}
    count = ("import placer.controller.main as m; from placer import dataclass_cache as d; "
             "m._import_engine(); print(d.install().compiled, len(d.install().used))")
    before = subprocess.run([sys.executable, "-c", count], env=env, capture_output=True, text=True, timeout=120)
    assert before.returncode == 0, before.stderr
    compiled, used = map(int, before.stdout.split())
    assert compiled == used and used > 300
    done = subprocess.run([sys.executable, "-m", "placer.precompile"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "dataclass methods compiled" in done.stdout, done.stderr
    after = subprocess.run([sys.executable, "-c", count], env=env, capture_output=True, text=True, timeout=120)
    assert after.returncode == 0, after.stderr
    assert after.stdout.split() == ["0", str(used)]


def test_released_tables_are_gone_and_classes_still_compile(builtin_exec: None, monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path) -> None:
    """`placer run` drops the tables once its imports are done: a class made later compiles its
    methods (as without the cache) and nothing more is written."""
    cache = CodeCache(tmp_path / "cache.marshal")
    monkeypatch.setattr(dataclasses, "exec", cache.exec, raising=False)
    _make_classes()
    assert cache.save() and cache.used
    cache.release()
    assert cache.stored == {} and cache.used == {}
    frozen, _ = _make_classes()
    assert frozen("a") == frozen("a") and cache.used  # compiled as usual
    assert not cache.save(force=True) and len(CodeCache(tmp_path / "cache.marshal").stored) > 0  # file untouched
