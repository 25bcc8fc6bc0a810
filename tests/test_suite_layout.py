"""The test suite's own layout: shared helpers come from tests/helpers/, never from another test module or the
conftest."""

from __future__ import annotations

import ast
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
