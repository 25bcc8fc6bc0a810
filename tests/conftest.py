"""Shared fixtures: stand-in profiler tools on PATH, one shared local Ray cluster and one shared multi-node cluster
for the whole run, markers set from what a test needs, and the count of the clusters a run started."""

from __future__ import annotations

import os
import random
import tempfile
import time
from pathlib import Path

import pytest
from helpers import clusters, scheduling
from helpers.environment import run_ray_settings
from helpers.order import shuffled
from helpers.standins import SYSTEM_PATH, TESTS_DIR, install_stand_ins, tool_records

# Fixtures that put a test on a Ray cluster: the shared ones, and those of modules that start their own.
SHARED_CLUSTER_FIXTURES = {"ray_cluster", "shared_cluster", "multi_node_cluster"}
CLUSTER_FIXTURES = SHARED_CLUSTER_FIXTURES | {
    "ray_start_head", "local_ray", "small_gcs_cluster", "two_nodes", "cluster", "job", "token_cluster",
    "unfixed_cluster", "demo_run",
}  # fmt: skip
BUILD_FIXTURES = {"fresh_venv", "bare_worker_venv"}
UNITS_FILE = pytest.StashKey[Path]()
# Each test file's seconds in this run (this process's tests; the controller's: every worker's).
SECONDS_BY_FILE: dict[str, float] = {}
NEEDS = {
    "cluster": "a Ray cluster (the shared one, a multi-node one, or one of its own)",
    "fresh_cluster": "a Ray cluster of its own: the cluster itself is what it tests (counted at the end)",
    "build": "a build of the project (wheel, venv)",
    "framework": "a framework's own code (verl, ...) installed by scripts/setup-venv",
    "slow": "a long job (minutes)",
}


def pytest_configure(config: pytest.Config) -> None:
    # Clusters the tests start, and the drivers they run, inherit the run's Ray settings (worker niceness, no
    # prestarted workers: helpers/environment.py says why).
    os.environ.update(run_ray_settings())
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        # Each pytest-xdist worker has Ray's temp dir to itself: its clusters' address file (which `ray.init()` and
        # `address="auto"` read), sessions and sockets never meet another worker's.
        os.environ["RAY_TMPDIR"] = str(clusters.short_temp_dir(f"{worker}-"))
    elif config.getoption("dist", "no") == "loadfile":  # the controller: its workers say each file's unit here
        handle, units = tempfile.mkstemp(prefix="nrlprof-test-units-")
        os.close(handle)
        os.environ[scheduling.UNITS_VARIABLE] = units
        config.stash[UNITS_FILE] = Path(units)
    for name, text in NEEDS.items():
        config.addinivalue_line("markers", f"{name}: needs {text}")


def pytest_unconfigure(config: pytest.Config) -> None:
    if units := config.stash.get(UNITS_FILE, None):
        os.environ.pop(scheduling.UNITS_VARIABLE, None)
        units.unlink(missing_ok=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`cluster` on every test that needs one; the files on a session cluster a worker would start for itself form one
    unit; units longest first (helpers/scheduling.py), a unit's tests together (the driver joins the multi-node
    cluster once)."""
    tests_of_file: dict[str, list[pytest.Item]] = {}
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if fixtures & CLUSTER_FIXTURES or item.get_closest_marker("fresh_cluster"):
            item.add_marker(pytest.mark.cluster)
        if fixtures & BUILD_FIXTURES:
            item.add_marker(pytest.mark.build)
        tests_of_file.setdefault(scheduling.file_of(item.nodeid), []).append(item)
    unit_of_file: dict[str, str] = {}
    for name, tests in tests_of_file.items():
        group = scheduling.group_of_file(getattr(test, "fixturenames", ()) for test in tests)
        unit_of_file[name] = group or name
    scheduling.share_units(unit_of_file)
    seed = os.environ.get("NRLPROF_TEST_SHUFFLE")
    if seed:
        items[:] = shuffled(items, random.Random(seed))
        return
    rank = {unit: n for n, unit in enumerate(scheduling.longest_first(unit_of_file, scheduling.recorded_seconds()))}
    items.sort(key=lambda item: rank[unit_of_file[scheduling.file_of(item.nodeid)]])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """`--dist loadfile`: a file is one unit, and a group of files is one."""
    if config.getvalue("dist") == "loadfile":
        return scheduling.FilesAndGroups(config, log)
    return None


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    name = scheduling.file_of(report.nodeid)
    SECONDS_BY_FILE[name] = SECONDS_BY_FILE.get(name, 0.0) + report.duration


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("fresh_cluster"):
        clusters.count_start("of their own, in tests")


def pytest_sessionfinish(session: pytest.Session) -> None:
    if hasattr(session.config, "workeroutput"):  # a pytest-xdist worker: its counts go to the controller
        session.config.workeroutput["ray_cluster_starts"] = dict(clusters.STARTS)
    elif os.environ.get("NRLPROF_TEST_RECORD_DURATIONS"):
        scheduling.record_seconds(scheduling.recorded_seconds() | SECONDS_BY_FILE)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    clusters.STARTS.update(getattr(node, "workeroutput", {}).get("ray_cluster_starts", {}))


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    starts = ", ".join(f"{count} {kind}" for kind, count in sorted(clusters.STARTS.items())) or "none"
    terminalreporter.write_line(f"Ray clusters started: {sum(clusters.STARTS.values())} ({starts})")
    if seed := os.environ.get("NRLPROF_TEST_SHUFFLE"):
        terminalreporter.write_line(f"in a shuffled order: NRLPROF_TEST_SHUFFLE={seed}")


@pytest.fixture(scope="module", autouse=True)
def module_working_directory(tmp_path_factory):
    """A module's fixtures run in an empty directory of the module's own, not where pytest was started: what a
    fixture's job writes by default lands there, and what a tool reads by default (`step_anatomy/` here) is never
    another module's or a file left in the checkout."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp_path_factory.mktemp("module-cwd"))
        yield


@pytest.fixture(autouse=True)
def own_working_directory(tmp_path_factory, monkeypatch):
    """Every test, and every process it starts, runs in an empty directory of its own: default output
    directories (`step_anatomy/`, `torch_profiler_trace/`) land there, never in the checkout."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))


@pytest.fixture(scope="session")
def stand_in_env(tmp_path_factory):
    root = tmp_path_factory.mktemp("tools")
    bin_dir = install_stand_ins(root / "bin")
    log_dir = root / "calls"
    return {"bin": bin_dir, "log": log_dir, "PATH": f"{bin_dir}:{SYSTEM_PATH}"}


@pytest.fixture(scope="session")
def token_auth():
    """Token auth on for this run, as `ray.init()` turns it on in Ray 2.60; every cluster started here uses it."""
    with pytest.MonkeyPatch.context() as environment:
        environment.setenv("RAY_AUTH_MODE", "token")
        # On a loaded machine the GCS may take longer than Ray's default 30 s to write its port.
        environment.setenv("RAY_gcs_server_port_wait_time_s", "120")
        from ray._private.authentication.authentication_token_setup import ensure_token_if_auth_enabled
        from ray._raylet import Config

        Config.initialize("")  # Ray caches the mode it read at import; `ray.init()` refreshes it the same way
        ensure_token_if_auth_enabled(None, create_token_if_missing=True)
        yield


@pytest.fixture(scope="session")
def shared_cluster(stand_in_env, token_auth):
    """One local Ray cluster for the whole run; its raylet sees the stand-in tools and its runtime-env agent carries
    nrlprof's fix (the in-memory route)."""
    from nrlprof.rayfix.plugins_env import PLUGINS_VARIABLE, with_agent_hook

    # Only the cluster's processes take these; the driver's own environment is put back at once.
    with pytest.MonkeyPatch.context() as environment:
        environment.setenv("PATH", stand_in_env["PATH"])
        environment.setenv("NRLPROF_FAKE_TOOL_LOG", str(stand_in_env["log"]))
        worker_paths = [str(TESTS_DIR), str(TESTS_DIR / "on_verl"), os.environ.get("PYTHONPATH")]
        environment.setenv("PYTHONPATH", os.pathsep.join(filter(None, worker_paths)))
        environment.setenv(PLUGINS_VARIABLE, with_agent_hook(os.environ.get(PLUGINS_VARIABLE)))
        cluster = clusters.start_cluster("shared local", {"num_cpus": 16})
    yield cluster
    import ray

    ray.shutdown()
    cluster.shutdown()


@pytest.fixture(scope="module")
def ray_cluster(shared_cluster):
    """The `ray` module, this process's driver connected to the shared local cluster."""
    import ray

    clusters.connect(shared_cluster.address)
    # `ray.init(address="auto")` in a process the test starts (an engine's child) reads /tmp/ray's address file,
    # which a module's own cluster takes over and deletes when it stops: it names the shared cluster again.
    ray._private.utils.write_ray_address(shared_cluster.address)
    return ray


@pytest.fixture(scope="session")
def multi_node_cluster(stand_in_env, token_auth):
    """One cluster of three raylets on this machine for the multi-node modules (`helpers.clusters.MultiNode`); the
    stand-in tools are on its nodes' PATH."""
    multi = clusters.start_multi_node({"PATH": stand_in_env["PATH"]})
    yield multi
    clusters.disconnect()
    multi.shutdown()


@pytest.fixture(scope="module")
def on_multi_node(multi_node_cluster):
    """The multi-node cluster for one module: joined as a job of its own, with no file another module planted, and
    cleared of this module's when it ends."""
    multi_node_cluster.clear()
    multi_node_cluster.join()
    yield multi_node_cluster
    multi_node_cluster.clear()


@pytest.fixture(scope="session")
def ray_start_head(tmp_path_factory):
    """One head started with `ray start` (token auth, nrlprof's agent hook, the stand-in tools) for the tests of jobs
    on such a cluster; see `helpers.clusters.ray_start_cluster` for what it yields. Its drivers run as processes."""
    with clusters.ray_start_cluster(tmp_path_factory.mktemp("ray_start"), with_hook=True, num_cpus=16) as cluster:
        yield cluster


@pytest.fixture(autouse=True)
def no_actor_left_behind(request):
    """Actors a test created on a shared cluster are killed after it (a module's own fixtures keep theirs)."""
    if not set(request.fixturenames) & SHARED_CLUSTER_FIXTURES:
        yield
        return
    before = clusters.alive_actor_ids()
    yield
    if clusters.connected_address() is not None:
        clusters.kill_actors(clusters.alive_actor_ids() - before)


@pytest.fixture
def fresh_nrlprof():
    """nrlprof deactivated before and after the test: no hook or window leaks between tests."""
    import nrlprof

    nrlprof.disable()
    yield nrlprof
    nrlprof.disable()


@pytest.fixture
def activate(fresh_nrlprof, monkeypatch, tmp_path):
    """Activate nrlprof in this (driver) process from the given NRL_* variables.

    Step anatomy (on whenever a backend is) is off unless the test names its directory: its finish waits for
    Ray's last task events (1.5 s or more), which tests of other features need not pay.
    """

    def _activate(**variables: str):
        for name in list(os.environ):
            if name.startswith(("NRL_", "NRLPROF_")):
                monkeypatch.delenv(name)
        if "NRL_STEP_ANATOMY_DIR" not in variables:
            variables.setdefault("NRL_STEP_ANATOMY", "0")
        for name, value in variables.items():
            monkeypatch.setenv(name, value)
        fresh_nrlprof.activate_from_env()
        return fresh_nrlprof

    return _activate


@pytest.fixture
def calls(stand_in_env):
    """Records of the stand-in tools made during this test only."""
    started = time.time()

    def _records(tool: str = "nsys") -> list[dict]:
        return [r for r in tool_records(stand_in_env["log"], tool) if r["time"] >= started]

    return _records


@pytest.fixture
def nrlprof_log():
    """Messages of the `nrlprof` logger in this process (its handler does not propagate to pytest's)."""
    import logging

    messages: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(record.getMessage())

    handler = Collect(level=logging.DEBUG)
    logger = logging.getLogger("nrlprof")
    logger.addHandler(handler)
    yield messages
    logger.removeHandler(handler)


@pytest.fixture
def ray_dir(tmp_path: Path) -> Path:
    """`<tmp>/ray/_private/runtime_env/{nsight,rocprof_sys}.py`, copied from the installed Ray."""
    import shutil

    import ray

    source = Path(ray.__file__).parent / "_private" / "runtime_env"
    target = tmp_path / "ray" / "_private" / "runtime_env"
    target.mkdir(parents=True)
    for name in ("nsight.py", "rocprof_sys.py"):
        shutil.copyfile(source / name, target / name)
    return tmp_path / "ray"
