"""Which way nrlprof's imports go (ARCHITECTURE.md), read from the code's own import statements by an AST walk.

- No import cycle among nrlprof's modules, counting the imports at module level (`TYPE_CHECKING` blocks too).
- No loop between nrlprof's packages, counting the imports inside functions too; the children's start-up shim
  importing nrlprof is the one exception. Every package's `__init__.py` says what lives there.
- No cycle through a tools module at all, counting the imports inside functions as well; and nowhere two modules
  that import each other, inside functions or not.
- Each tools package imports only the packages below it; a command module imports no other command.
- The post-run tools that read files offline (read, figures, merge, render) never import Ray.
- Outside the tools, only the command line's front ends (`nrlprof.cli`, `nrlprof.demo`) import a tools module.
- No module over 500 lines.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "nrlprof"
TOOLS = "nrlprof.tools"
MAX_LINES = 500
# tools package (or leaf module) -> the tools packages it may import, besides itself
MAY_IMPORT: dict[str, set[str]] = {
    "progress": set(),
    "output": set(),
    "read": {"progress"},
    "figures": {"read", "progress"},
    "merge": {"read", "progress", "output"},
    "advice": {"figures", "read"},
    "render": {"advice", "figures", "read"},
    "cluster": set(),
    "collect": {"cluster", "progress", "output"},
    "check": {"cluster"},
    "plan": {"cluster"},
    "capture": {"cluster"},
    "remote": {"cluster", "collect", "figures", "read", "merge", "progress", "output"},
}
OFFLINE = ("progress", "output", "read", "figures", "advice", "merge", "render")
COMMANDS = "commands"
SHARED_BY_COMMANDS = {f"{TOOLS}.{COMMANDS}", f"{TOOLS}.{COMMANDS}.options"}
FRONT_ENDS = ("nrlprof.cli", "nrlprof.demo")


@dataclass(frozen=True)
class Import:
    source: str
    target: str  # a module of nrlprof, or the top-level name of another distribution
    line: int
    module_level: bool  # at the top of the module (TYPE_CHECKING blocks included), not inside a function


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str) -> str:
    """The nrlprof module `name` names (a module, or a name inside one), or the top-level name of a distribution."""
    top = name.partition(".")[0]
    if top != "nrlprof":
        return top
    while name not in modules():
        name = name.rpartition(".")[0]
    return name


def _imported_names(node: ast.Import | ast.ImportFrom, source: str) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = source if modules()[source].name == "__init__.py" else source.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}" if base else package
    return [f"{base}.{alias.name}" for alias in node.names]


def _imports_in(node: ast.AST, source: str, module_level: bool) -> list[Import]:
    found = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found += _imports_in(child, source, False)
        elif isinstance(child, (ast.Import, ast.ImportFrom)):
            targets = {_resolve(name) for name in _imported_names(child, source)} - {source}
            found += [Import(source, target, child.lineno, module_level) for target in sorted(targets)]
        else:
            found += _imports_in(child, source, module_level)
    return found


@cache
def imports() -> list[Import]:
    return [
        edge
        for source, path in modules().items()
        for edge in _imports_in(ast.parse(path.read_text(encoding="utf-8")), source, True)
    ]


def cycles(edges: list[Import]) -> list[list[str]]:
    """The strongly connected components of more than one module, each sorted."""
    graph: dict[str, set[str]] = {name: set() for name in modules()}
    for edge in edges:
        if edge.target in graph:
            graph[edge.source].add(edge.target)
    return strongly_connected(graph)


def package_of(module: str) -> str:
    """`nrlprof.runtime` for every module under nrlprof/runtime/; a module at the top (`nrlprof.log`) and the
    package itself (`nrlprof`) stand alone."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 or modules()[module].name == "__init__.py" else module


def package_loops(edges: list[Import]) -> list[list[str]]:
    graph: dict[str, set[str]] = {package_of(name): set() for name in modules()}
    for edge in edges:
        if edge.target in modules() and package_of(edge.source) != package_of(edge.target):
            graph[package_of(edge.source)].add(package_of(edge.target))
    return strongly_connected(graph)


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while not component or component[-1] != node:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def tools_part(module: str) -> str | None:
    """`read` for nrlprof.tools.read.traces, `progress` for nrlprof.tools.progress; None outside the tools."""
    if not module.startswith(f"{TOOLS}."):
        return None
    return module[len(TOOLS) + 1 :].partition(".")[0]


def _where(edge: Import) -> str:
    return f"{modules()[edge.source].relative_to(PACKAGE.parent)}:{edge.line} imports {edge.target}"


def test_the_walk_sees_the_package():
    assert {"nrlprof", "nrlprof.cli", "nrlprof.layout", f"{TOOLS}.read.traces"} <= modules().keys()
    assert any(e.source == "nrlprof.cli" and e.target == "nrlprof.exit_codes" for e in imports())


def test_no_cycle_among_module_level_imports():
    assert cycles([e for e in imports() if e.module_level]) == []


def test_no_two_modules_import_each_other_counting_imports_inside_functions():
    edges = {(e.source, e.target): e for e in imports()}
    mutual = [f"{_where(e)} and back" for (a, b), e in sorted(edges.items()) if a < b and (b, a) in edges]
    assert mutual == []


def test_no_cycle_anywhere_counting_imports_inside_functions():
    """An adapter hands a framework's config to the activation through its Controller, never by importing it."""
    assert cycles(imports()) == []


# The start-up shim of a worker's children (runtime/children/site) imports nrlprof itself, as a user's program would.
PACKAGE_LOOP_EXCEPTIONS = {("nrlprof.runtime.children.site.sitecustomize", "nrlprof")}


def test_no_loop_between_packages_counting_imports_inside_functions():
    """The process-wide leaves (nrlprof.process) sit below every package that patches or reads the session."""
    edges = [e for e in imports() if (e.source, e.target) not in PACKAGE_LOOP_EXCEPTIONS]
    assert package_loops(edges) == []


def test_the_package_loop_test_sees_a_loop():
    back = Import("nrlprof.process.state", "nrlprof.runtime.windows.gate", 1, False)
    assert package_loops([*imports(), back]) != []
    assert package_loops(imports()) != [], "the start-up shim's import of nrlprof is the one exception"


def test_every_package_says_what_lives_there():
    missing = [name for name, path in modules().items() if path.name == "__init__.py" and not ast.get_docstring(
        ast.parse(path.read_text(encoding="utf-8")))]  # fmt: skip
    assert missing == []


def test_every_tools_module_lies_in_a_known_package():
    assert {tools_part(m) for m in modules()} - {None, "", COMMANDS, *MAY_IMPORT} == set()


@pytest.mark.parametrize("part", sorted(MAY_IMPORT))
def test_a_tools_package_imports_only_the_packages_below_it(part):
    allowed = MAY_IMPORT[part] | {part, ""}
    wrong = [
        _where(e)
        for e in imports()
        if tools_part(e.source) == part and tools_part(e.target) is not None and tools_part(e.target) not in allowed
    ]
    assert wrong == []


def test_a_command_imports_no_other_command():
    wrong = [
        _where(e)
        for e in imports()
        if tools_part(e.source) == COMMANDS
        and tools_part(e.target) == COMMANDS
        and e.target not in SHARED_BY_COMMANDS
        and e.source not in SHARED_BY_COMMANDS
    ]
    assert wrong == []


def test_the_offline_tools_never_import_ray():
    wrong = [_where(e) for e in imports() if tools_part(e.source) in OFFLINE and e.target == "ray"]
    assert wrong == []


def test_nothing_but_the_front_ends_imports_the_tools():
    wrong = [
        _where(e)
        for e in imports()
        if tools_part(e.target) is not None and tools_part(e.source) is None and not e.source.startswith(FRONT_ENDS)
    ]
    assert wrong == []


def test_no_module_is_longer_than_500_lines():
    long = {name: n for name, path in modules().items() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_architecture_md_names_every_tools_package():
    text = (PACKAGE.parent / "ARCHITECTURE.md").read_text()
    for part in [*MAY_IMPORT, COMMANDS]:
        is_package = (PACKAGE / "tools" / part).is_dir()
        assert f"`{part}/`" in text if is_package else f"`{part}.py`" in text, part
