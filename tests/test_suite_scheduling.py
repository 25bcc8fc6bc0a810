"""How the suite is handed to pytest-xdist's workers (helpers/scheduling.py): the files on a session cluster that each
worker would start for itself are one unit, and units run longest first by the recorded seconds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers import scheduling
from helpers.environment import environment_without

TESTS_DIR = Path(__file__).parent
REPOSITORY = TESTS_DIR.parent


def collected_files(units_file: Path) -> list[str]:
    """The suite's test files in the order pytest collects them, with `units_file` given to share the units."""
    env = environment_without(scheduling.UNITS_VARIABLE, "NRLPROF_TEST_SHUFFLE") | {
        scheduling.UNITS_VARIABLE: str(units_file)
    }
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "tests"],
        cwd=REPOSITORY, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    files = [line.split("::", 1)[0] for line in done.stdout.splitlines() if "::" in line]
    return [name for n, name in enumerate(files) if n == 0 or files[n - 1] != name]


def test_the_files_on_a_session_cluster_of_each_worker_are_one_unit_and_units_run_longest_first(tmp_path):
    units_file = tmp_path / "units.json"
    order = collected_files(units_file)
    units = json.loads(units_file.read_text())
    assert set(units) == set(order), "every collected file has its unit"
    assert units["tests/test_collect.py"] == units["tests/test_anatomy_nodes.py"] == "multi_node_cluster"
    assert units["tests/test_on_demand.py"] == units["tests/on_verl/test_verl_jobs.py"] == "ray_start_head"
    assert units["tests/test_config_on_ray.py"] == "tests/test_config_on_ray.py", "a file alone is its own unit"
    assert set(units.values()) - set(units) == set(scheduling.SESSION_CLUSTER_GROUPS)

    unit_order = [units[name] for name in order]
    runs = [unit for n, unit in enumerate(unit_order) if n == 0 or unit_order[n - 1] != unit]
    assert len(runs) == len(set(runs)), f"the files of a unit are collected together: {runs}"
    seconds = scheduling.recorded_seconds()
    cost = [sum(seconds.get(name, 0) for name, unit in units.items() if unit == run) for run in runs]
    assert cost == sorted(cost, reverse=True), list(zip(runs, cost, strict=True))
    assert cost[0] > 0, "tests/durations.json names files that are collected"


def test_the_scheduler_takes_the_units_the_workers_shared(pytestconfig, tmp_path, monkeypatch):
    units_file = tmp_path / "units.json"
    monkeypatch.setenv(scheduling.UNITS_VARIABLE, str(units_file))
    scheduling.share_units({"tests/test_a.py": "multi_node_cluster", "tests/test_b.py": "tests/test_b.py"})
    assert [p.name for p in tmp_path.iterdir()] == ["units.json"], "written whole, under its name"
    monkeypatch.setattr(pytestconfig.option, "tx", ["2*popen"])  # as `-n 2` gives it
    scheduler = scheduling.FilesAndGroups(pytestconfig)
    assert scheduler._split_scope("tests/test_a.py::test_x[1]") == "multi_node_cluster"
    assert scheduler._split_scope("tests/test_b.py::Class::test_y") == "tests/test_b.py"
    assert scheduler._split_scope("tests/test_new.py::test_z") == "tests/test_new.py", "a file no one named"


def test_units_are_ordered_by_the_sum_of_their_files_seconds():
    units = {"a.py": "a.py", "b.py": "group", "c.py": "group", "d.py": "d.py"}
    seconds = {"a.py": 50, "b.py": 30, "c.py": 30, "d.py": 55}
    assert scheduling.longest_first(units, seconds) == ["group", "d.py", "a.py"]
    assert scheduling.longest_first(units, {}) == ["a.py", "group", "d.py"], "unrecorded: as collected"


def test_recorded_seconds_are_whole_longest_first_and_name_files_that_exist(tmp_path):
    path = tmp_path / "durations.json"
    scheduling.record_seconds({"tests/test_a.py": 2.4, "tests/test_b.py": 9.6, "tests/test_c.py": 0.2}, path)
    assert path.read_text() == '{\n "tests/test_b.py": 10,\n "tests/test_a.py": 2\n}\n'
    assert scheduling.recorded_seconds(tmp_path / "none.json") == {}
    missing = [name for name in scheduling.recorded_seconds() if not (REPOSITORY / name).is_file()]
    assert missing == [], "tests/durations.json names files that are gone: NRLPROF_TEST_RECORD_DURATIONS=1 scripts/test"
