"""The test suite's own layout: shared helpers come from tests/helpers/, never from another test module or the
conftest."""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).parent


def is_test_module(name: str) -> bool:
    top = name.split(".")[0]
    return top == "conftest" or top.startswith("test_")


def imports_of_test_modules(path: Path) -> list[tuple[str, str | None]]:
    """(module, name) for each import of a test module or the conftest in `path`; name None for `import module`."""
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names if is_test_module(alias.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and is_test_module(node.module):
            found += [(node.module, alias.name) for alias in node.names]
    return found


def test_no_module_imports_a_test_module_or_the_conftest():
    wrong = [
        f"{path.relative_to(TESTS_DIR)}: {module}{'' if name is None else '.' + name}"
        for path in sorted(TESTS_DIR.rglob("*.py"))
        for module, name in imports_of_test_modules(path)
    ]
    assert wrong == [], "shared helpers belong in tests/helpers/:\n" + "\n".join(wrong)


def test_the_check_sees_every_form_of_import(tmp_path):
    module = tmp_path / "test_x.py"
    module.write_text(
        "import test_a\nimport conftest as c\nfrom test_b import f\nfrom conftest import tool_records\n"
        "def g():\n    from test_c.sub import h\nfrom helpers.traces import gpu_trace\nfrom . import test_d\n"
    )
    assert imports_of_test_modules(module) == [
        ("test_a", None),
        ("conftest", None),
        ("test_b", "f"),
        ("conftest", "tool_records"),
        ("test_c.sub", "h"),
    ]


# Imported by jsonschema when installed (jupyter-events asks for it), it builds a grammar at import: 3-4 s of CPU
# in every process that imports Ray, which was half of the suite's time.
SLOW_AT_IMPORT = ("rfc3987_syntax",)


def test_the_suites_environment_keeps_importing_ray_cheap():
    import subprocess
    import sys

    loaded = subprocess.run(
        [sys.executable, "-c", f"import ray, sys; print(*[m for m in {SLOW_AT_IMPORT!r} if m in sys.modules])"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert loaded == [], f"{loaded} imported with Ray: scripts/setup-venv must keep them out of .venv"


def test_a_shuffled_order_moves_files_and_tests_and_keeps_each_file_together():
    import random

    from helpers.order import shuffled

    def file_of(item: str) -> str:
        return item.split("::")[0]

    items = [f"tests/test_{f}.py::test_{t}" for f in "abcdefgh" for t in range(8)]
    orders = [shuffled(items, random.Random(seed), file_of) for seed in (1, 2)]
    for order in orders:
        assert sorted(order) == items
        files = [file_of(item) for item in order]
        runs = [f for index, f in enumerate(files) if index == 0 or files[index - 1] != f]
        assert sorted(runs) == sorted(set(files)) and runs != sorted(runs)  # each file once, files moved
        assert order[:8] != sorted(order[:8])  # the first file's tests moved within it
    assert orders[0] != orders[1]
    assert shuffled(items, random.Random(1), file_of) == orders[0]  # a seed gives its order again


def test_a_process_started_without_the_suites_ray_variables_keeps_the_runs_ray_settings(monkeypatch):
    from helpers.environment import RUN_RAY_SETTINGS, environment_without

    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    monkeypatch.setenv("NRL_NSYS_WORKER_PATTERNS", "*policy*")
    env = environment_without("NRL_", "RAY_")
    assert "RAY_ADDRESS" not in env and "NRL_NSYS_WORKER_PATTERNS" not in env
    assert {name: env[name] for name in RUN_RAY_SETTINGS} == {"RAY_worker_niceness": "0",
                                                             "RAY_prestart_worker_first_driver": "0"}  # fmt: skip
    monkeypatch.setenv("RAY_worker_niceness", "5")  # one running the suite chose otherwise
    assert environment_without("RAY_")["RAY_worker_niceness"] == "5"


def test_the_shared_clusters_workers_run_at_the_niceness_of_the_rest_of_the_run(ray_cluster):
    import os

    @ray_cluster.remote(num_cpus=0)
    def niceness() -> int:
        return os.nice(0)

    assert ray_cluster.get(niceness.remote(), timeout=300) == os.nice(0)  # Ray would put them 15 below


@pytest.fixture(scope="module")
def fixture_directory() -> tuple[Path, bool]:
    """Where a module's fixture runs, and whether it was empty then."""
    here = Path.cwd()
    return here, not any(here.iterdir())


def test_a_modules_fixtures_run_in_an_empty_directory_of_their_own_not_where_pytest_started(fixture_directory, request):
    """A fixture's tool that reads a default directory (`summary` on the nodes reads `step_anatomy/` where it runs)
    finds nothing another module, or a benchmark run in the checkout, left there."""
    directory, was_empty = fixture_directory
    started = Path(request.config.invocation_params.dir).resolve()
    assert was_empty and directory.resolve() != started
    assert Path.cwd() != directory, "and each test runs in a directory of its own within the run"


# ---- test programs are modules, not strings ----

PROGRAM_LINE = re.compile(r"^\s*(import \w|from [\w.]+ import |def \w+\(|class \w+\b.*:|@ray\.remote)", re.M)


def looks_like_a_program(text: str) -> bool:
    """Python code of more than one line: it compiles, or it is a template of it (`import`, `def`, … at a line's
    start; a YAML file or a log has none)."""
    text = textwrap.dedent(text).strip()
    if "\n" not in text:
        return False  # one line after `python -c`: a command, not a program
    try:
        compile(text, "<string>", "exec")
    except SyntaxError:
        return PROGRAM_LINE.search(text) is not None
    return True


class ProgramStrings(ast.NodeVisitor):
    """Each place in a module where a Python program is written as a string and run or saved: `textwrap.dedent` of
    a program; the program after a Python interpreter's `-c`; what is written to a `.py` file or to a file that
    starts `#!` and Python."""

    def __init__(self, tree: ast.Module, lines: list[str]):
        self.lines = lines
        self.assigned: dict[str, list[ast.expr]] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        self.assigned.setdefault(target.id, []).append(node.value)
        self.found: list[str] = []

    def texts(self, node: ast.expr, seen: frozenset[str] = frozenset()) -> list[str] | None:
        """The strings `node` can be, or None where the module does not say (a parameter, a call's result)."""
        if isinstance(node, ast.Constant):
            return [node.value] if isinstance(node.value, str) else []
        if isinstance(node, ast.JoinedStr):  # an f-string: its literal parts, each field as its expression
            return ["".join(v.value if isinstance(v, ast.Constant) else ast.unparse(v) for v in node.values)]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.texts(node.left, seen), self.texts(node.right, seen)
            return None if left is None or right is None else [a + b for a in left or [""] for b in right or [""]]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
            return self.texts(node.func.value, seen)
        if isinstance(node, ast.Call) and self.is_dedent(node) and node.args:
            return self.texts(node.args[0], seen)
        if isinstance(node, ast.Name) and node.id in self.assigned and node.id not in seen:
            found = [self.texts(value, seen | {node.id}) for value in self.assigned[node.id]]
            return None if any(f is None for f in found) else [t for f in found for t in f]
        return None

    def is_program(self, node: ast.expr) -> bool:
        texts = self.texts(node)
        return texts is None or any(looks_like_a_program(t) for t in texts)

    @staticmethod
    def is_dedent(node: ast.Call) -> bool:
        func = node.func
        return (isinstance(func, ast.Attribute) and func.attr == "dedent") or (
            isinstance(func, ast.Name) and func.id == "dedent"
        )

    @staticmethod
    def is_python(node: ast.expr) -> bool:
        text = ast.unparse(node)
        return text == "sys.executable" or "python" in text.lower()

    def is_python_file(self, node: ast.expr) -> bool:
        """A path expression whose last part ends in `.py`, or a name bound to one."""
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            last = node.right
            return isinstance(last, ast.Constant) and isinstance(last.value, str) and last.value.endswith(".py")
        if isinstance(node, ast.Name):
            return any(self.is_python_file(value) for value in self.assigned.get(node.id, []))
        return False

    def note(self, node: ast.AST, what: str) -> None:
        if not any(AS_DATA in line for line in self.lines[max(0, node.lineno - 2) : node.lineno]):
            self.found.append(f"{node.lineno}: {what}")

    def visit_Call(self, node: ast.Call) -> None:
        if self.is_dedent(node) and node.args and self.is_program(node.args[0]):
            self.note(node, "a program in textwrap.dedent")
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "write_text" and node.args:
            texts = self.texts(node.args[0]) or []
            shebang = any(t.startswith("#!") and re.search(r"python|executable", t.splitlines()[0]) for t in texts)
            if self.is_python_file(func.value) or shebang:
                self.note(node, "a program written to a file from a string")
        self.generic_visit(node)

    def visit_List(self, node: ast.List) -> None:
        self.command(node.elts)
        self.generic_visit(node)

    def visit_Tuple(self, node: ast.Tuple) -> None:
        self.command(node.elts)
        self.generic_visit(node)

    def command(self, parts: list[ast.expr]) -> None:
        for index, part in enumerate(parts[1:-1], start=1):
            after_python = isinstance(part, ast.Constant) and part.value == "-c" and self.is_python(parts[0])
            if after_python and self.is_program(parts[index + 1]):
                self.note(part, "a program after python -c")


def programs_written_as_strings(source: str) -> list[str]:
    tree = ast.parse(source)
    finder = ProgramStrings(tree, source.splitlines())
    finder.visit(tree)
    return finder.found


# Python source that a test hands nrlprof as its input, not a program it runs, says so on its line or the one before.
AS_DATA = "# source as data"
# Programs still written as strings; the list only shrinks. The one left is the stand-in tools' launcher: four lines
# that call `main` of a module of tests/nsys_standin/ (which ruff lints), written with this interpreter in its `#!`
# line (the tools' PATH has no `python`) so that the process is the tool itself, named `nsys` as a real nsys is; a
# `#!/bin/sh` line that runs the module would name it `python`.
STILL_STRINGS = {
    "helpers/standins.py": 1,
}


def test_test_programs_are_modules_that_ruff_lints_not_strings():
    """A program a test runs is a module (tests/programs/, or beside its tests), its parameters given by argv or the
    environment: ruff lints it, and its tracebacks name its lines."""
    found = {
        str(path.relative_to(TESTS_DIR)): programs_written_as_strings(path.read_text())
        for path in sorted(TESTS_DIR.rglob("*.py"))
        if path != Path(__file__)  # this module holds the pattern as the check's own examples
    }
    counts = {name: len(places) for name, places in found.items() if places}
    new = {name: found[name] for name, count in counts.items() if count > STILL_STRINGS.get(name, 0)}
    assert new == {}, "a program written as a string: make it a module, as tests/programs/ holds"
    assert counts == STILL_STRINGS, "a program of STILL_STRINGS became a module: take it off the list"


def test_the_check_finds_programs_written_as_strings_and_nothing_else():
    source = textwrap.dedent(
        '''
        import subprocess, sys, textwrap
        DRIVER = textwrap.dedent("""
            import ray
            ray.init()
        """)
        YAML = textwrap.dedent("""
            cluster:
              profiling: {backend: nsight}
        """)
        TEMPLATE = "import sys\\nsys.path.insert(0, {tests!r})\\n"

        def run(code, tmp_path):
            subprocess.run([sys.executable, "-c", textwrap.dedent(code)])
            subprocess.run([sys.executable, "-c", TEMPLATE.format(tests="t")])
            subprocess.run([sys.executable, "-c", "import ray; print(ray.__version__)"])
            subprocess.run(["bash", "-c", code])
            (tmp_path / "train.py").write_text(DRIVER)
            (tmp_path / "run.yaml").write_text(YAML)
            (tmp_path / "nsys").write_text(f"#!{sys.executable}\\nimport sys\\n")
            subprocess.run([sys.executable, "tests/programs/job.py", "--steps", "4"])
        '''
    )
    assert programs_written_as_strings(source) == [
        "3: a program in textwrap.dedent",
        "14: a program after python -c",
        "14: a program in textwrap.dedent",
        "15: a program after python -c",
        "18: a program written to a file from a string",
        "20: a program written to a file from a string",
    ]
