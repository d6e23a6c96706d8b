"""The plugin registry: built-in and third-party plugins alike come from the `placer.plugins` entry points;
broken entries are reported and skipped, and the other plugins still load."""

from __future__ import annotations

import ast
import importlib.metadata
import logging
import subprocess
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from placer import plugins
from placer.cli import main
from placer.engine.framework import FilterPlugin, NoArgs, PluginArgs, ScorePlugin
from placer.engine.profile import UnknownPluginError, compile_profile
from placer.plugins import (
    ENTRY_POINT_GROUP,
    REGISTRY,
    LoadedPlugins,
    LoadError,
    check_plugin_class,
    load_plugins,
    log_plugins,
    unknown_plugin,
)
from placer.plugins.prefer_node import PreferNode
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parent.parent
PLUGINS_DIR = ROOT / "operator" / "placer" / "plugins"
EXAMPLE = ROOT / "examples" / "plugins" / "annotation-score"


def pyproject_entries(path: Path) -> dict[str, str]:
    project = tomllib.loads(path.read_text())["project"]
    return dict(project.get("entry-points", {}).get(ENTRY_POINT_GROUP, {}))


def plugin_classes_of(module: Path) -> list[str]:
    """Classes of a plugin module that declare `name: ClassVar[str]` (the plugin; not its Args models)."""

    def names_itself(item: ast.stmt) -> bool:
        return (isinstance(item, ast.AnnAssign) and getattr(item.target, "id", None) == "name"
                and "ClassVar" in ast.unparse(item.annotation))

    tree = ast.parse(module.read_text())
    return [node.name for node in tree.body if isinstance(node, ast.ClassDef) and any(map(names_itself, node.body))]


@dataclass
class Dist:
    name: str


@dataclass
class Entry:
    """A fake EntryPoint: what `load_plugins` reads of one (name, value, dist, load)."""

    name: str
    loads: Any
    package: str = "acme-plugins"
    value: str = "acme_plugins:Thing"

    @property
    def dist(self) -> Dist:
        return Dist(self.package)

    def load(self) -> Any:
        if isinstance(self.loads, Exception):
            raise self.loads
        return self.loads


# ---- what the built-ins declare ---------------------------------------------------------------------


def test_pyproject_declares_every_plugin_module_and_nothing_else() -> None:
    entries = pyproject_entries(ROOT / "pyproject.toml")
    modules = sorted(p.stem for p in PLUGINS_DIR.glob("*.py") if not p.stem.startswith("_")
                     and not p.stem.endswith("_test"))
    for module in modules:
        classes = plugin_classes_of(PLUGINS_DIR / f"{module}.py")
        assert len(classes) == 1, f"{module}.py: one plugin class per module, found {classes}"
        [cls] = classes
        line = f'{cls} = "placer.plugins.{module}:{cls}"'
        assert entries.get(cls) == f"placer.plugins.{module}:{cls}", (
            f'plugin module {module}.py is not registered: add `{line}` under [project.entry-points."placer.plugins"] '
            "in pyproject.toml, then `make install`")
    declared = {value.split(":")[0].removeprefix("placer.plugins.") for value in entries.values()}
    assert declared == set(modules), f"entries without a module: {sorted(declared - set(modules))}"


def test_the_installed_entry_points_are_the_pyprojects() -> None:
    installed = {e.name: e.value for e in importlib.metadata.distribution("placer").entry_points
                 if e.group == ENTRY_POINT_GROUP}
    assert installed == pyproject_entries(ROOT / "pyproject.toml"), "stale install: run `make install`"


def test_the_registry_holds_the_builtins_from_their_entry_points() -> None:
    builtins = pyproject_entries(ROOT / "pyproject.toml")
    for name, value in builtins.items():
        module, _, attr = value.partition(":")
        cls = REGISTRY[name]
        assert (cls.__module__, cls.__qualname__, cls.name) == (module, attr, name)
    assert not plugins.LOAD_ERRORS, [str(e) for e in plugins.LOAD_ERRORS]
    assert set(REGISTRY) == set(builtins) | set(pyproject_entries(EXAMPLE / "pyproject.toml"))
    assert {"NodeResourcesFit", "NodeReady"} <= plugins.FILTER_NAMES and "AnnotationScore" in plugins.SCORE_NAMES
    assert {"DefaultPreemption", "DynamicResources"} == plugins.POST_FILTER_NAMES


def test_the_example_package_is_found_with_its_distribution() -> None:
    loaded = load_plugins()
    assert loaded.plugins["AnnotationScore"].__module__ == "placer_annotation_score"
    assert loaded.packages["AnnotationScore"] == "placer-annotation-score"
    assert loaded.packages["PreferNode"] == "placer"


# ---- broken packages -----------------------------------------------------------------------------


def test_a_broken_entry_point_is_reported_and_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.metadata.entry_points
    broken = [
        importlib.metadata.EntryPoint("Missing", "no_such_placer_package:Missing", ENTRY_POINT_GROUP),
        importlib.metadata.EntryPoint("NoAttr", "placer.engine.framework:NoSuchPlugin", ENTRY_POINT_GROUP),
        Entry("Crashes", RuntimeError("boom at import"), package="crashing-plugin"),
    ]

    def entry_points(**selection: Any) -> list[Any]:
        return [*broken, *real(**selection)]

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    loaded = load_plugins()
    assert set(loaded.plugins) == set(REGISTRY)  # every other plugin still loads
    messages = {error.entry.split(" = ")[0]: str(error) for error in loaded.errors}
    assert messages["Missing"] == (
        'plugin package "?": entry point "Missing = no_such_placer_package:Missing" skipped: cannot be imported: '
        "ModuleNotFoundError: No module named 'no_such_placer_package'")
    assert "cannot be imported: AttributeError" in messages["NoAttr"] and "NoSuchPlugin" in messages["NoAttr"]
    assert messages["Crashes"] == ('plugin package "crashing-plugin": entry point "Crashes = acme_plugins:Thing" '
                                   "skipped: cannot be imported: RuntimeError: boom at import")
    assert set(loaded.broken) == {"Missing", "NoAttr", "Crashes"}


class GoodArgs(PluginArgs):
    level: int = 1


class Good(ScorePlugin[GoodArgs]):
    name: ClassVar[str] = "Good"
    Args: ClassVar[type[PluginArgs]] = GoodArgs

    def score(self, pod: Any, cluster: Any, slots: np.ndarray) -> np.ndarray:
        return np.zeros(len(slots), dtype=np.int64)


class Abstract(FilterPlugin[NoArgs]):
    name: ClassVar[str] = "Abstract"


class Misnamed(Good):
    name: ClassVar[str] = "Other"


class ModelArgs(Good):
    name: ClassVar[str] = "ModelArgs"
    Args: ClassVar[Any] = BaseModel


class ForgotArgs(ScorePlugin[GoodArgs]):
    """Declared over GoodArgs but Args left at NoArgs: every profile's args would be refused."""

    name: ClassVar[str] = "ForgotArgs"

    def score(self, pod: Any, cluster: Any, slots: np.ndarray) -> np.ndarray:
        return np.zeros(len(slots), dtype=np.int64)


class LowerName(Good):
    name: ClassVar[str] = "lowercase"


def make_good() -> None:
    """Not a class."""


@pytest.mark.parametrize(
    ("name", "obj", "problem"),
    [
        ("Good", make_good, "it is a function, not a class"),
        ("Good", dict, "builtins.dict is not a Placer plugin: it must subclass FilterPlugin, ScorePlugin or "
                       "PostFilterPlugin (placer.engine.framework)"),
        ("Abstract", Abstract, "Abstract is abstract: it does not implement filter"),
        ("Good", Misnamed, "Misnamed.name is 'Other', but the entry point names it 'Good'"),
        ("ModelArgs", ModelArgs, "ModelArgs.Args must be a subclass of placer.engine.framework.PluginArgs"),
        ("ForgotArgs", ForgotArgs, "ForgotArgs.Args is NoArgs, but the class is declared over GoodArgs"),
        ("lowercase", LowerName, '"lowercase" is not a valid plugin name: the CRD accepts only ^[A-Z][A-Za-z0-9]*$'),
    ],
)
def test_a_wrong_class_is_rejected_with_a_clear_message(name: str, obj: object, problem: str) -> None:
    found = check_plugin_class(name, obj)
    assert found is not None and found.startswith(problem), found
    loaded = load_plugins([Entry(name, obj)])
    assert loaded.plugins == {}
    [error] = loaded.errors
    assert str(error).startswith(f'plugin package "acme-plugins": entry point "{name} = acme_plugins:Thing" skipped: ')
    assert problem in str(error)


def test_a_sound_class_is_accepted() -> None:
    assert check_plugin_class("Good", Good) is None
    assert all(check_plugin_class(name, cls) is None for name, cls in REGISTRY.items())
    assert load_plugins([Entry("Good", Good)]).plugins == {"Good": Good}


def test_a_package_cannot_replace_a_builtin() -> None:
    class Impostor(Good):
        name: ClassVar[str] = "PreferNode"

    builtin = importlib.metadata.EntryPoint("PreferNode", "placer.plugins.prefer_node:PreferNode", ENTRY_POINT_GROUP)
    loaded = load_plugins([Entry("PreferNode", Impostor, package="evil-plugins"), builtin])
    assert loaded.plugins == {"PreferNode": PreferNode}
    [error] = loaded.errors
    assert str(error) == (
        'plugin package "evil-plugins": entry point "PreferNode = acme_plugins:Thing" skipped: name clash with the '
        'built-in plugin PreferNode (placer.plugins.prefer_node.PreferNode, package "placer")')


class Unbuildable:
    """A field type pydantic cannot validate (no `arbitrary_types_allowed`)."""


class UnbuildableArgs(PluginArgs):  # made: `PluginArgs` defers building its validator
    thing: Unbuildable | None = None


class WithUnbuildableArgs(ScorePlugin[UnbuildableArgs]):
    name: ClassVar[str] = "WithUnbuildableArgs"
    Args: ClassVar[type[PluginArgs]] = UnbuildableArgs

    def score(self, pod: Any, cluster: Any, slots: np.ndarray) -> np.ndarray:
        return np.zeros(slots.size)


def test_a_package_plugin_whose_args_cannot_be_built_is_skipped_at_load() -> None:
    """Its args model is built at load (not at its first profile), and it is skipped as a plugin
    whose import failed; a sound package plugin's args are built too."""
    loaded = load_plugins([Entry("WithUnbuildableArgs", WithUnbuildableArgs, package="odd-plugins"),
                           Entry("Good", Good, package="alpha-plugins")])
    assert loaded.plugins == {"Good": Good} and GoodArgs.__pydantic_complete__
    [error] = loaded.errors
    assert error.package == "odd-plugins"
    assert error.problem.startswith("cannot be imported: PydanticSchemaGenerationError: Unable to generate")


def test_every_builtin_plugins_args_model_builds() -> None:
    """Placer's own args models are built when first used, not at load: each must build."""
    for cls in REGISTRY.values():
        cls.Args.model_rebuild()
        assert cls.Args.__pydantic_complete__, cls.Args


def test_of_two_packages_with_one_name_the_first_by_package_name_wins() -> None:
    class Other(Good):
        pass

    loaded = load_plugins([Entry("Good", Other, package="zeta-plugins"), Entry("Good", Good, package="alpha-plugins")])
    assert loaded.plugins == {"Good": Good} and loaded.packages == {"Good": "alpha-plugins"}
    [error] = loaded.errors
    assert error.package == "zeta-plugins" and 'name clash with the plugin Good' in error.problem
    assert 'package "alpha-plugins"' in error.problem


# ---- what users see ------------------------------------------------------------------------------


def test_a_profile_naming_a_skipped_plugin_is_told_why(monkeypatch: pytest.MonkeyPatch) -> None:
    error = LoadError("acme-plugins", "Gone = acme_plugins:Gone", "cannot be imported: ImportError: no numpy")
    monkeypatch.setattr(plugins, "_LOADED", LoadedPlugins(broken={"Gone": error}))
    assert unknown_plugin("Gone").startswith('unknown plugin "Gone" (installed: AnnotationScore, DefaultPreemption, ')
    assert unknown_plugin("Gone").endswith(f"; {error}")
    with pytest.raises(UnknownPluginError) as caught:
        compile_profile("p", {"schedulerName": "s", "scores": [{"name": "Gone"}]})
    assert caught.value.reason == "UnknownPlugin" and "no numpy" in str(caught.value)


def skipped(monkeypatch: pytest.MonkeyPatch) -> LoadError:
    error = LoadError("acme-plugins", "Broken = acme_plugins:Broken", "cannot be imported: ImportError: nope")
    monkeypatch.setattr(plugins, "LOAD_ERRORS", (error,))
    return error


def test_simulate_says_which_entries_it_skipped_and_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    error = skipped(monkeypatch)
    cluster, profile = tmp_path / "cluster.yaml", tmp_path / "profile.yaml"
    cluster.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: a}\n"
                       "status: {allocatable: {cpu: '1', pods: '5'}}\n")
    profile.write_text("apiVersion: placer.dev/v1alpha1\nkind: SchedulerProfile\nmetadata: {name: d}\n"
                       "spec: {schedulerName: placer}\n")
    assert main(["simulate", "--cluster", str(cluster), "--profile", str(profile)]) == 0
    assert capsys.readouterr().err.splitlines() == [f"placer simulate: error: {error}"]


def test_run_logs_the_packages_and_each_skipped_entry(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    error = skipped(monkeypatch)
    with caplog.at_level(logging.INFO, logger="placer.plugins"):
        log_plugins()
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("INFO", "plugins from packages: AnnotationScore (placer-annotation-score)"),
        ("ERROR", str(error)),
    ]


def run_without_entry_points(code: str) -> subprocess.CompletedProcess[str]:
    """Python as from a source tree (PYTHONPATH=operator, nothing installed): no entry point is registered."""
    prelude = "import importlib.metadata as m; m.entry_points = lambda **kw: m.EntryPoints(()); "
    return subprocess.run([sys.executable, "-c", prelude + code], capture_output=True, text=True, timeout=60,
                          cwd=ROOT)


@pytest.mark.parametrize(("code", "check"), [
    ("import placer.plugins", lambda p: "PluginsNotInstalled" in p.stderr),
    ("import sys; from placer.cli import main; sys.exit(main(['simulate', '--cluster', 'c', '--profile', 'p']))",
     lambda p: p.returncode == 1 and p.stderr.startswith("placer simulate: no built-in plugin is registered")),
])
def test_uninstalled_source_tree_is_a_clear_error(code: str, check: Callable[[Any], bool]) -> None:
    process = run_without_entry_points(code)
    assert process.returncode != 0 and check(process), process.stderr
    assert "Placer is not installed" in process.stderr and "make install" in process.stderr


def test_args_validators_are_built_when_first_used_not_at_import() -> None:
    """`PluginArgs` defers each subclass's validator (`defer_build`): a cold start imports every
    built-in plugin and its profiles use a few; a profile's compile builds those it uses, and they
    work. (A package's plugins have theirs built at load: `_args_problem`.)"""
    code = (
        "from placer.plugins import REGISTRY, _LOADED; "
        "built = [c.Args.__name__ for n, c in REGISTRY.items() "
        "if _LOADED.packages[n] == 'placer' and c.Args.__pydantic_complete__]; "
        "assert not built, built; "
        "from placer.engine.profile import compile_profile; "
        "compile_profile('p', {'schedulerName': 'x', 'scores': [{'name': 'NodeResourcesFit', "
        "'args': {'scoringStrategy': {'type': 'MostAllocated'}}}]}, 1); "
        "from placer.plugins.node_resources_fit import NodeResourcesFit; "
        "assert NodeResourcesFit.Args.__pydantic_complete__; "
        "assert [c for c in REGISTRY.values() if not c.Args.__pydantic_complete__]; print('ok')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
