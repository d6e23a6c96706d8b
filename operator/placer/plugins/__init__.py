"""The plugin registry: every plugin Placer can run, built-in or from an installed package, by name.

Plugins are found through the entry-point group `placer.plugins` (API.md §5), each entry
`Name = module:Class`. Placer's own plugins are declared in its `pyproject.toml` exactly as a
third-party package declares its own, so both are found, checked and registered the same way,
once, when this module is imported. An entry that cannot be used (it does not import, is not a
plugin class, its `name` differs from the entry's, it clashes with a plugin already registered) is
skipped and kept in `LOAD_ERRORS`, one sentence naming the package and the entry, which `placer
run` logs and `placer simulate` prints at start-up; every other plugin still loads.

One module per built-in plugin; its docstring says what it does, its args and an example
profile, and its tests sit beside it in `<module>_test.py`.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import logging
import re
import typing
from collections.abc import Iterable
from dataclasses import dataclass, field

from placer.engine.framework import FilterPlugin, Plugin, PluginArgs, PostFilterPlugin, ScorePlugin

__all__ = [
    "ENTRY_POINT_GROUP",
    "FILTER_NAMES",
    "LOAD_ERRORS",
    "NAME_PATTERN",
    "POST_FILTER_NAMES",
    "REGISTRY",
    "SCORE_NAMES",
    "LoadError",
    "LoadedPlugins",
    "PluginsNotInstalled",
    "check_plugin_class",
    "load_plugins",
    "log_plugins",
    "unknown_plugin",
]

ENTRY_POINT_GROUP = "placer.plugins"
#: what the CRD accepts as a plugin name; an entry named otherwise could never be used
NAME_PATTERN = "^[A-Z][A-Za-z0-9]*$"
_NAME = re.compile(NAME_PATTERN)
#: entries whose module is under this package are Placer's own (built-in)
BUILTIN_MODULE_PREFIX = "placer.plugins."
KINDS = (FilterPlugin, ScorePlugin, PostFilterPlugin)

logger = logging.getLogger("placer.plugins")


class PluginsNotInstalled(ImportError):
    """No built-in plugin is registered: Placer runs from a source tree without being installed."""


@dataclass(frozen=True, slots=True)
class LoadError:
    """Why one entry point was skipped."""

    package: str  # the distribution declaring it ("?" when unknown)
    entry: str  # `Name = module:Class`
    problem: str

    def __str__(self) -> str:
        return f'plugin package "{self.package}": entry point "{self.entry}" skipped: {self.problem}'


@dataclass
class LoadedPlugins:
    """What `load_plugins` found: the usable classes by name, and the entries it skipped."""

    plugins: dict[str, type[Plugin]] = field(default_factory=dict)
    errors: list[LoadError] = field(default_factory=list)
    #: name -> the distribution that provides it ("placer" for the built-ins)
    packages: dict[str, str] = field(default_factory=dict)
    #: entry name -> why it was skipped, so a profile naming it is told more than "unknown"
    broken: dict[str, LoadError] = field(default_factory=dict)


def _declared_args(cls: type) -> list[type]:
    """The args classes a plugin class names as its base's type parameter (`ScorePlugin[MyArgs]`)."""
    for klass in cls.__mro__:
        found = [
            arg
            for base in klass.__dict__.get("__orig_bases__", ())
            if isinstance(typing.get_origin(base), type) and issubclass(typing.get_origin(base), Plugin)
            for arg in typing.get_args(base)
            if isinstance(arg, type)
        ]
        if found:
            return found
    return []


def check_plugin_class(name: str, obj: object) -> str | None:
    """Why `obj`, registered as `name`, cannot be a Placer plugin; None when it can."""
    if not _NAME.fullmatch(name):
        return f'"{name}" is not a valid plugin name: the CRD accepts only {NAME_PATTERN}'
    if not isinstance(obj, type):
        return f"it is a {type(obj).__name__}, not a class"
    if not issubclass(obj, KINDS):
        return (f"{obj.__module__}.{obj.__qualname__} is not a Placer plugin: it must subclass FilterPlugin, "
                "ScorePlugin or PostFilterPlugin (placer.engine.framework)")
    if inspect.isabstract(obj):
        missing = ", ".join(sorted(getattr(obj, "__abstractmethods__", ())))
        return f"{obj.__qualname__} is abstract: it does not implement {missing}"
    declared = getattr(obj, "name", None)
    if declared != name:
        return f"{obj.__qualname__}.name is {declared!r}, but the entry point names it {name!r}"
    args = getattr(obj, "Args", None)
    if not (isinstance(args, type) and issubclass(args, PluginArgs)):
        return f"{obj.__qualname__}.Args must be a subclass of placer.engine.framework.PluginArgs, not {args!r}"
    for wanted in _declared_args(obj):
        if not issubclass(args, wanted):
            return (f"{obj.__qualname__}.Args is {args.__qualname__}, but the class is declared over "
                    f"{wanted.__qualname__} (set `Args: ClassVar[type[PluginArgs]] = {wanted.__qualname__}`)")
    return None


def _args_problem(cls: type[Plugin]) -> str | None:
    """Why a package's args model cannot validate anything, found at load: `PluginArgs` defers each
    model's validator to its first use, so a model pydantic cannot build (an unsupported field
    type) is built here, and such a plugin is skipped as it was when building failed at its import.
    Placer's own are built by its tests, not at each start."""
    try:
        cls.Args.model_rebuild()
    except Exception as error:  # pydantic's schema errors, or anything a validator's own code raises
        return f"cannot be imported: {type(error).__name__}: {error}"
    return None


def _builtin(entry: importlib.metadata.EntryPoint) -> bool:
    return entry.value.startswith(BUILTIN_MODULE_PREFIX)


def _packages(entries: Iterable[importlib.metadata.EntryPoint]) -> list[tuple[importlib.metadata.EntryPoint, str]]:
    """Each entry with its distribution's name, read once per distribution (`dist.name` parses the
    whole METADATA file; the built-ins are Placer's own and need no reading)."""
    names: dict[int, str] = {}
    found = []
    for entry in entries:
        dist = getattr(entry, "dist", None)
        if _builtin(entry):
            package = "placer"
        elif dist is None:
            package = "?"
        else:
            package = names.setdefault(id(dist), dist.name)
        found.append((entry, package))
    return found


def load_plugins(entries: Iterable[importlib.metadata.EntryPoint] | None = None) -> LoadedPlugins:
    """Import and check every entry of `placer.plugins` (or of `entries`): built-ins first, then the
    packages', by name, so a package can never replace a built-in and the outcome is the same on
    every start."""
    if entries is None:
        entries = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    loaded = LoadedPlugins()
    for entry, package in sorted(_packages(entries), key=lambda ep: (not _builtin(ep[0]), ep[0].name, ep[1])):
        where = f"{entry.name} = {entry.value}"
        problem = None
        holder = loaded.plugins.get(entry.name)
        if holder is not None:
            owner = "the built-in plugin" if loaded.packages[entry.name] == "placer" else "the plugin"
            problem = (f'name clash with {owner} {entry.name} ({holder.__module__}.{holder.__qualname__}, '
                       f'package "{loaded.packages[entry.name]}")')
        else:
            try:
                obj = entry.load()
            except Exception as error:  # a broken package must not stop Placer: any error is reported
                problem = f"cannot be imported: {type(error).__name__}: {error}"
            else:
                problem = check_plugin_class(entry.name, obj) or (None if package == "placer" else _args_problem(obj))
        if problem is not None:
            error = LoadError(package, where, problem)
            loaded.errors.append(error)
            loaded.broken.setdefault(entry.name, error)
            continue
        loaded.plugins[entry.name] = obj
        loaded.packages[entry.name] = package
    return loaded


def unknown_plugin(name: str) -> str:
    """The message for a profile naming a plugin no installed package provides."""
    message = f'unknown plugin "{name}" (installed: {", ".join(sorted(REGISTRY))})'
    broken = _LOADED.broken.get(name)
    if broken is not None:
        message += f"; {broken}"
    return message


def log_plugins() -> None:
    """Log, once per start-up of `placer run`, the plugins from packages and every entry skipped."""
    extra = sorted(f"{name} ({package})" for name, package in _LOADED.packages.items() if package != "placer")
    if extra:
        logger.info("plugins from packages: %s", ", ".join(extra))
    for error in LOAD_ERRORS:
        logger.error("%s", error)


_LOADED = load_plugins()
if not any(package == "placer" for package in _LOADED.packages.values()):
    raise PluginsNotInstalled(
        f'no built-in plugin is registered under the entry-point group "{ENTRY_POINT_GROUP}": Placer is not '
        "installed (or was installed before its plugins became entry points). Install it with `make install` "
        "or `pip install -e .` and run it from that environment, not from a source tree on PYTHONPATH."
        + "".join(f"\n  {error}" for error in _LOADED.errors)
    )

REGISTRY: dict[str, type[Plugin]] = _LOADED.plugins
LOAD_ERRORS: tuple[LoadError, ...] = tuple(_LOADED.errors)

FILTER_NAMES: frozenset[str] = frozenset(name for name, cls in REGISTRY.items() if issubclass(cls, FilterPlugin))
SCORE_NAMES: frozenset[str] = frozenset(name for name, cls in REGISTRY.items() if issubclass(cls, ScorePlugin))
POST_FILTER_NAMES: frozenset[str] = frozenset(
    name for name, cls in REGISTRY.items() if issubclass(cls, PostFilterPlugin)
)
