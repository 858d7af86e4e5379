"""The packages' import direction: each package imports only the layers below it, as
its docstring says, and no module imports itself back through others, at load time or
inside a function (where an import only hides the cycle from a look at the module's top)."""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest

import faultline

ROOT = Path(faultline.__file__).parent

#: package (or top-level module) -> what it may import; faultline/cli.py may import all.
ALLOWED: dict[str, frozenset[str]] = {
    "errors": frozenset(),
    "compiled": frozenset(),
    "faults": frozenset(),
    "yamlfile": frozenset({"errors"}),
    "targeted": frozenset({"errors", "faults"}),
    "spec": frozenset({"errors", "faults", "targeted", "yamlfile"}),
    "history": frozenset({"errors", "rundir"}),
    "rundir": frozenset({"errors"}),
    "checkers": frozenset({"errors", "faults", "targeted", "spec", "history", "rundir", "compiled"}),
    "cluster": frozenset({"errors", "faults", "spec", "rundir"}),
    "brokerstate": frozenset({"errors", "faults", "targeted", "spec", "rundir", "cluster"}),
    "workloads": frozenset({"errors", "faults", "spec", "history", "cluster"}),
    "nemeses": frozenset({"errors", "faults", "targeted", "spec", "history", "cluster", "brokerstate"}),
    "report": frozenset({"errors", "faults", "spec", "history", "rundir", "checkers"}),
    "analysis": frozenset({"errors", "faults", "targeted", "spec", "history", "rundir", "checkers", "report",
                           "compiled"}),
    "hunt": frozenset({"errors", "spec", "history", "rundir", "checkers"}),
    "run": frozenset({"errors", "faults", "targeted", "spec", "history", "rundir", "checkers", "cluster",
                      "brokerstate", "workloads", "nemeses", "report"}),
    "sweep": frozenset({"errors", "faults", "spec", "yamlfile", "rundir", "checkers", "cluster", "workloads",
                        "hunt", "run"}),
}
#: The pytest plugin: a cluster and a hand-driven nemesis for users' own tests.
ALLOWED["pytest_plugin"] = frozenset({"errors", "spec", "history", "cluster", "nemeses"})
#: The commands drive every package; none imports them.
ALLOWED["commands"] = frozenset(ALLOWED)


def modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        yield ".".join(parts[:-1] if parts[-1] == "__init__" else parts), path


def layer(module: str) -> str:
    return module.split(".")[1] if "." in module else module


def imports(path: Path, module: str) -> Iterator[str]:
    """The faultline modules ``path`` imports anywhere: at module level, for type checking
    and inside functions."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith("faultline"):
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    yield full if _is_module(full) else node.module
        elif isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.startswith("faultline"))


def _is_module(name: str) -> bool:
    rel = Path(*name.split("."))
    return (ROOT.parent / rel).with_suffix(".py").is_file() or (ROOT.parent / rel / "__init__.py").is_file()


def test_the_layers_form_no_cycle() -> None:
    seen: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, f"the allowed layers loop: {' -> '.join((*path, name))}"
        if name not in seen:
            for below in ALLOWED[name]:
                visit(below, (*path, name))
            seen.add(name)

    for name in ALLOWED:
        visit(name, ())


@pytest.mark.parametrize(("module", "path"), list(modules()), ids=[m for m, _ in modules()])
def test_each_module_imports_only_its_layers_below(module: str, path: Path) -> None:
    here = layer(module)
    if module in ("faultline", "faultline.cli", "faultline.__main__"):
        return
    assert here in ALLOWED, f"{module}: a package the layer map does not know; add it to ALLOWED"
    wrong = sorted({m for m in imports(path, module)
                    if layer(m) != here and layer(m) not in ALLOWED[here]})
    assert not wrong, f"{module} ({here}) imports {wrong}; {here} may import {sorted(ALLOWED[here])}"


def test_no_module_imports_itself_back() -> None:
    """Imports form no cycle: module-level ones, those for type checking, and those inside
    functions (runstate.destroy imported the docker backend, which imports runstate)."""
    graph = {m: {i for i in imports(p, m) if i != m} for m, p in modules()}
    state: dict[str, int] = {}

    def visit(m: str, stack: list[str]) -> None:
        state[m] = 1
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                raise AssertionError("import cycle: " + " -> ".join([*stack[stack.index(n):], n]))
            if n not in state:
                visit(n, [*stack, n])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])


def test_every_package_says_what_it_owns_and_may_import() -> None:
    for name in ALLOWED:
        if (ROOT / name).is_dir():
            doc = importlib.import_module(f"faultline.{name}").__doc__ or ""
            assert "May import" in doc, f"faultline/{name}/__init__.py: say what it owns and may import"


def test_the_host_pieces_import_no_backend() -> None:
    """``cluster.host`` is what both backends share: it knows neither of them (the docker
    backend builds on the local one, and both on the host pieces)."""
    backends = ("faultline.cluster.local", "faultline.cluster.docker")
    wrong = sorted(f"{m} imports {i}" for m, p in modules() if m.startswith("faultline.cluster.host")
                   for i in imports(p, m) if i.startswith(backends))
    assert not wrong, wrong
