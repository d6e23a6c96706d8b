"""Placer's shape, checked from its source (docs/architecture.md): no import circle among its modules
(imports made only for type checking, or inside functions, included); only the composition root and
`main` know `SchedulerState`; the controller is split into sub-packages by stage; nothing patches
the interpreter, the standard library or Kopf's private modules; no private name is imported from
another of Placer's modules."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "operator" / "placer"
CONTROLLER = PACKAGE / "controller"
STAGES = ("transport", "informers", "scheduling", "binding", "profiles", "lifecycle")


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(path: Path, name: str, known: dict[str, Path]) -> Iterator[tuple[str, ast.ImportFrom | ast.Import]]:
    """Every module of Placer's that `path` imports, anywhere in it."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known:
                    yield alias.name, node
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([base] if base else [])])
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if full in known:
                    yield full, node
                elif base in known:
                    yield base, node


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                component.append(other)
                if other == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_no_import_circle_anywhere_in_placer() -> None:
    known = modules()
    graph = {name: {other for other, _ in imports(path, name, known) if other != name} for name, path in known.items()}
    assert circles(graph) == []


def test_the_circle_finder_finds_one() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_only_the_composition_root_and_main_know_the_scheduler_state() -> None:
    known = modules()
    holders = sorted(name for name, path in known.items()
                     if any(other == "placer.controller.state" for other, _ in imports(path, name, known)))
    assert holders == ["placer.controller.main"]


def test_the_controller_is_split_into_stages() -> None:
    for stage in STAGES:
        assert (CONTROLLER / stage / "__init__.py").is_file(), stage
    loose = sorted(path.name for path in CONTROLLER.glob("*.py"))
    assert loose == ["__init__.py", "main.py", "metrics.py", "options.py", "signals.py", "state.py"]


def test_nothing_patches_the_interpreter_or_reaches_into_private_modules() -> None:
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not any(part.startswith("_") for part in node.module.split(".")[1:]) or \
                    node.module.startswith("placer"), f"{path}: from {node.module} import ..."
            if isinstance(node, ast.Import):
                for alias in node.names:
                    assert not any(part.startswith("_") for part in alias.name.split(".")[1:]), f"{path}: {alias.name}"
            if isinstance(node, ast.Assign | ast.AugAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    text = ast.unparse(target)
                    assert not text.startswith("sys.modules"), f"{path}:{node.lineno}: {text}"
                    root = text.split(".", 1)[0].split("[", 1)[0]
                    if "." in text and root in {"dataclasses", "builtins", "asyncio", "ssl", "json", "sys", "os"}:
                        raise AssertionError(f"{path}:{node.lineno}: assigns {text}")


def test_no_private_name_is_imported_across_placers_modules() -> None:
    known = modules()
    for name, path in known.items():
        if path.name.endswith("_test.py"):
            continue  # a plugin's test beside it may test its helpers
        for _, node in imports(path, name, known):
            if isinstance(node, ast.ImportFrom):
                private = [alias.name for alias in node.names if alias.name.startswith("_")]
                assert not private, f"{name} imports {private} from {node.module}"
