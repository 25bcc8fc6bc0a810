"""Shared fixtures: stand-in profiler tools on PATH and one real local Ray cluster per session."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).parent
STAND_IN_BODY = """\
import sys
sys.path.insert(0, {tests!r})
from nsys_standin.{module} import main
sys.exit(main())
"""
# No `python` here: Ray's unfixed plugin, which runs `nsys ... python`, cannot start a worker.
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


def install_stand_ins(bin_dir: Path) -> Path:
    """The stand-in `nsys` (tests/nsys_standin, its libraries built now) and `rocprof-sys-python`, run by this
    interpreter."""
    from nsys_standin import build

    build.library_dir()
    bin_dir.mkdir(parents=True, exist_ok=True)
    for tool, module in (("nsys", "cli"), ("rocprof-sys-python", "rocprof")):
        path = bin_dir / tool
        path.write_text(f"#!{sys.executable}\n" + STAND_IN_BODY.format(tests=str(TESTS_DIR), module=module))
        path.chmod(0o755)
    return bin_dir


def tool_records(log_dir: Path, tool: str = "nsys") -> list[dict]:
    records = [json.loads(p.read_text()) for p in sorted(log_dir.glob(f"{tool}-*.json"))]
    return [r for r in records if r["command"][1:3] != ["-c", ""]]


def start_local_ray(ray, attempts: int = 2) -> None:
    """`ray.init` of a local cluster; once more if Ray's fixed 30 s wait for its raylet ran out (a loaded machine)."""
    for attempt in range(attempts):
        try:
            ray.init(address="local", num_cpus=8, include_dashboard=False, log_to_driver=True, logging_level="WARNING")
            return
        except Exception as err:
            if attempt == attempts - 1 or "timed out during startup" not in str(err):
                raise
            ray.shutdown()


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


@pytest.fixture(scope="module")
def ray_cluster(stand_in_env, tmp_path_factory):
    """A local Ray cluster per test module; its runtime-env agent carries nrlprof's fix (the in-memory route)."""
    import ray

    from nrlprof.rayfix.plugins_env import PLUGINS_VARIABLE, with_agent_hook

    # Undoes only what it set: `ray.init` sets RAY_AUTH_MODE here for the rest of the process, and a later
    # cluster (ray.cluster_utils.Cluster) started without it refuses this driver's actors.
    with pytest.MonkeyPatch.context() as environment:
        environment.setenv("PATH", stand_in_env["PATH"])
        environment.setenv("NRLPROF_FAKE_TOOL_LOG", str(stand_in_env["log"]))
        environment.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(TESTS_DIR), os.environ.get("PYTHONPATH")])))
        environment.setenv(PLUGINS_VARIABLE, with_agent_hook(os.environ.get(PLUGINS_VARIABLE)))
        start_local_ray(ray)
    yield ray
    ray.shutdown()


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
