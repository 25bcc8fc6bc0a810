"""`nrlprof doctor` on a real local Ray cluster started with a stand-in `nsys` and nrlprof's agent hook."""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path

import pytest
import ray
from helpers import clusters
from helpers.standins import SYSTEM_PATH
from rich.console import Console

from nrlprof.config.env import SELECTING_VARIABLES
from nrlprof.errors import ToolError
from nrlprof.rayfix.plugins_env import PLUGINS_VARIABLE, install_agent_hook
from nrlprof.tools.check import doctor as D
from nrlprof.tools.check import node as N
from nrlprof.tools.commands import doctor as doctor_command

NSYS_VERSION = "2025.1.1.103-test"
# `profile`/`export` behave as the `mode` file next to it says: `report` (a report that exports), `qdstrm` (the
# importer fails: only the .qdstrm), anything else (nothing written).
STAND_IN_NSYS = f"""#!/bin/sh
mode=$(cat "$(dirname "$0")/mode" 2>/dev/null)
out=""; prev=""
for arg in "$@"; do [ "$prev" = "-o" ] && out="$arg"; prev="$arg"; done
case "$1" in
  --version) echo "NVIDIA Nsight Systems version {NSYS_VERSION}";;
  profile) [ -z "$out" ] && exit 0  # `profile --help`, as real nsys, writes no file
           [ "$mode" = report ] && printf NSYS > "$out.nsys-rep"; [ "$mode" = qdstrm ] && printf Q > "$out.qdstrm";;
  export) [ "$mode" = report ] && printf SQLITE > "$out";;
esac
exit 0
"""


@pytest.fixture(scope="module")
def local_ray():
    """A local cluster whose raylet inherited PATH with the stand-in nsys and RAY_RUNTIME_ENV_PLUGINS."""
    base = Path(tempfile.mkdtemp(prefix="nrld", dir="/tmp"))
    nsys = base / "bin" / "nsys"
    nsys.parent.mkdir()
    nsys.write_text(STAND_IN_NSYS)
    nsys.chmod(nsys.stat().st_mode | stat.S_IXUSR)
    saved = {name: os.environ.get(name) for name in ("PATH", PLUGINS_VARIABLE)}
    # Only this fixture's nsys: a PATH inherited from earlier tests may hold another stand-in.
    os.environ["PATH"] = os.pathsep.join([str(nsys.parent), str(Path(sys.executable).parent), SYSTEM_PATH])
    install_agent_hook(os.environ)
    try:
        clusters.disconnect()  # the shared cluster stays up; this module's driver joins its own
        clusters.count_start("local, a module's own")
        ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False, _temp_dir=str(base / "r"))
        yield nsys
    finally:
        ray.shutdown()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    """No NRL_* selection variable; the driver's cwd (where the default torch dir resolves) is a temp dir."""
    for name in SELECTING_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return monkeypatch


@pytest.fixture
def nsys_planned(clean_env):
    clean_env.setenv("NRL_NSYS_WORKER_PATTERNS", "*policy*")
    clean_env.setenv("NRL_NSYS_PROFILE_STEP_RANGE", "3:5")
    return clean_env


def test_everything_in_place_exits_0(local_ray, nsys_planned, tmp_path, capsys):
    assert doctor_command.run(argparse.Namespace(address=None, output_dir=None, json=True)) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is True and data["configured"] is True
    assert data["output_dir"] == str(tmp_path / "torch_profiler_trace")
    [node] = data["nodes"]
    assert node["nsys"]["path"] == str(local_ray) and node["nsys"]["version"] == NSYS_VERSION
    assert node["agent_hook"] is True and node["raylet_pid"] is not None, (node["raylet_pid"], node["agent_detail"])
    assert node["output_writable"] is True
    assert node["python_version"] == data["driver_python"]
    assert not list(tmp_path.iterdir())  # the writability probe left nothing behind


def test_reports_the_interpreter_and_ray_of_the_agent_and_workers(local_ray, clean_env):
    """This cluster was started by this process: its raylet runs agent and workers with this interpreter."""
    [node] = D.doctor().nodes
    ray_dir = os.path.dirname(ray.__file__)
    assert node.agent.command == sys.executable and node.workers.command == sys.executable
    assert node.agent.ray_dir == ray_dir and node.workers.ray_dir == ray_dir
    assert node.agent.pid is not None and node.agent.executable == os.path.realpath(sys.executable)
    assert node.plugin_files_detail == f"Ray at {ray_dir}"
    assert node.agent_fix is True and "RAY_RUNTIME_ENV_PLUGINS" in node.agent_fix_reason
    assert node.plugin_files["nsight"]["path"] == os.path.join(ray_dir, "_private/runtime_env/nsight.py")


def test_interpreter_of_a_uv_worker_command_keeps_the_wrapper():
    script = "/venv/lib/ray/_private/runtime_env/agent/main.py"
    command = ["/usr/bin/uv", "run", "--project", "/p", "python", "-u", script]
    found = N.interpreter_of([*command, "--node-id=abc"], N.AGENT_SCRIPT)
    assert found.command == "/usr/bin/uv run --project /p python"
    assert found.ray_dir == "/venv/lib/ray"
    assert N.interpreter_of(["python", "x.py"], N.AGENT_SCRIPT).ray_dir == ""


def test_table_names_each_node(local_ray, clean_env):
    report = D.doctor()
    console = Console(file=io.StringIO(), width=200)
    doctor_command.render(report, console)
    text = console.file.getvalue()
    assert report.nodes[0].label in text and NSYS_VERSION in text and "in memory" in text


def test_nothing_configured_is_reported_and_exits_0(local_ray, clean_env):
    report = D.doctor()
    assert report.exit_code == 0 and not report.configured
    assert any("nothing is configured" in p.message for p in report.problems)


def test_missing_nsys_names_node_and_fix(local_ray, nsys_planned):
    hidden = local_ray.with_name("nsys.hidden")
    local_ray.rename(hidden)
    try:
        report = D.doctor()
    finally:
        hidden.rename(local_ray)
    [node] = report.nodes
    assert not node.nsys.found
    assert report.exit_code == 1
    [error] = report.errors
    assert error.node == node.label and "nsys" in error.message and "install" in error.fix
    assert node.label in error.describe()


def test_unwritable_output_dir_is_an_error(local_ray, clean_env, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    report = D.doctor(output_dir=str(blocker / "traces"))
    [node] = report.nodes
    assert node.output_writable is False
    assert report.exit_code == 1
    assert any(p.node == node.label and "not writable" in p.message for p in report.errors)


def canary(report: D.DoctorReport, backend: str) -> dict:
    [node] = report.nodes
    return next(r for r in node.canary["results"] if r["backend"] == backend)


@pytest.mark.parametrize(
    ("mode", "ok", "detail"),
    [("report", True, "exported to SQLite"), ("qdstrm", False, "importer failed"), ("none", False, "wrote no report")],
)
def test_capture_checks_that_nsys_writes_a_readable_report(local_ray, nsys_planned, mode, ok, detail):
    (local_ray.parent / "mode").write_text(mode)
    try:
        report = D.doctor(capture=True)
    finally:
        (local_ray.parent / "mode").unlink()
    result = canary(report, "nsys")
    assert result["ok"] is ok and detail in result["detail"], result
    [node] = report.nodes
    assert [r["backend"] for r in node.canary["results"]] == ["nsys"]  # only the configured backend
    failures = [p for p in report.errors if "canary" in p.message]
    assert len(failures) == (0 if ok else 1)
    assert all(p.node == node.label and detail in p.message for p in failures)


def test_capture_with_torch_on_cpu_writes_a_readable_trace(local_ray, clean_env):
    clean_env.setenv("NRL_TORCH_PROFILE_WORKER_PATTERNS", "*policy*")
    clean_env.setenv("NRL_TORCH_PROFILE_STEP_RANGE", "3:5")
    report = D.doctor(capture=True, capture_timeout_s=540)  # a hang guard: a busy machine took 180 s
    [node] = report.nodes
    result = canary(report, "torch")
    assert result["ok"] is True and result["gpu"] is False and "CPU only" in result["detail"], result
    assert any(p.severity == D.NOTE and "no GPU" in p.message and p.node == node.label for p in report.problems)


def test_a_capture_past_its_time_limit_is_a_failed_canary_that_says_the_limit(local_ray, clean_env):
    clean_env.setenv("NRL_TORCH_PROFILE_WORKER_PATTERNS", "*policy*")
    clean_env.setenv("NRL_TORCH_PROFILE_STEP_RANGE", "3:5")
    report = D.doctor(capture=True, capture_timeout_s=0.25)  # torch's import alone takes longer
    result = canary(report, "torch")
    assert result["ok"] is False and result["detail"].endswith("did not finish within 0.25s"), result
    [failure] = [p for p in report.errors if "canary" in p.message]
    assert "the torch canary capture failed" in failure.message and "0.25s" in failure.message


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--capture", "--capture-timeout", "0"], "0 is not a positive number of seconds"),
        (["--capture", "--capture-timeout", "soon"], "'soon' is not a number of seconds"),
        (["--capture", "--capture-timeout", "inf"], "inf is not a positive number of seconds"),
    ],
)
def test_a_capture_timeout_that_is_not_a_positive_number_is_a_usage_error(argv, said, capsys):
    parser = argparse.ArgumentParser(prog="nrlprof doctor")
    doctor_command.add_arguments(parser)
    with pytest.raises(SystemExit) as exit_info:
        parser.parse_args(argv)
    assert exit_info.value.code == 2 and f"argument --capture-timeout: {said}" in capsys.readouterr().err


def test_a_capture_timeout_without_capture_is_refused_before_any_node_is_asked(monkeypatch):
    monkeypatch.setattr(doctor_command, "doctor", lambda **_: pytest.fail("doctor ran"))
    parser = argparse.ArgumentParser(prog="nrlprof doctor")
    doctor_command.add_arguments(parser)
    with pytest.raises(ToolError, match=r"^--capture-timeout 30 limits the captures of --capture: add --capture$"):
        doctor_command.run(parser.parse_args(["--capture-timeout", "30"]))
    assert parser.parse_args(["--capture", "--capture-timeout", "1.5"]).capture_timeout == 1.5


def _interpreter_that_exits(tmp_path: Path, code: int) -> str:
    """A stand-in for this interpreter, for the GPU probe's child: it only exits with `code`."""
    script = tmp_path / "python"
    script.write_text(f"#!/bin/sh\nexit {code}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def test_the_gpu_probe_asks_torch_in_a_child_only_on_a_node_with_a_gpu_device_node(tmp_path, monkeypatch):
    from nrlprof.tools.check import canary

    monkeypatch.setattr(sys, "executable", _interpreter_that_exits(tmp_path, 0))  # "torch sees a GPU"
    device = tmp_path / "nvidiactl"
    device.touch()
    assert canary.gpu_visible((str(device),)) is True
    assert canary.gpu_visible((str(tmp_path / "absent"), str(device))) is True
    # No device node: no GPU, without running the child that would have said yes.
    assert canary.gpu_visible((str(tmp_path / "absent"),)) is False
    assert canary.gpu_visible(()) is False
    monkeypatch.setattr(sys, "executable", _interpreter_that_exits(tmp_path, 1))
    assert canary.gpu_visible((str(device),)) is False


def test_dcgm_profiling_metrics_switched_on_are_named_with_how_to_pause_them(local_ray, clean_env):
    """DCGM's Profiling module, loaded once profiling fields are watched (dcgm-exporter's DCGM_FI_PROF_* counters),
    holds the driver's profiling lock for the whole node (DCGM #56): doctor says so, and how to pause it."""
    from helpers.standins import STAND_IN_BODY, TESTS_DIR
    from nsys_standin import dcgmi

    dcgmi_path = local_ray.parent / "dcgmi"
    dcgmi_path.write_text(f"#!{sys.executable}\n" + STAND_IN_BODY.format(tests=str(TESTS_DIR), module="dcgmi"))
    dcgmi_path.chmod(0o755)
    dcgmi.state_path().unlink(missing_ok=True)
    try:
        [node] = D.doctor().nodes
        assert node.dcgm_profiling is False and "Profiling module: Not loaded" in node.dcgm_detail
        subprocess_run([str(dcgmi_path), "dmon", "-e", "1001,1004", "-c", "1"])  # as dcgm-exporter's watches do
        report = D.doctor()
        [node] = report.nodes
        assert node.dcgm_profiling is True
        [warning] = [p for p in report.problems if "DCGM" in p.message]
        assert warning.severity == D.WARNING and warning.node == node.label and "DCGM #56" in warning.message
        assert "`dcgmi profile --pause`" in warning.fix and "`dcgmi profile --resume` after" in warning.fix
        assert report.exit_code == 0, "a warning: the job runs, its counters do not"
    finally:
        dcgmi_path.unlink()
        dcgmi.state_path().unlink(missing_ok=True)
    [node] = D.doctor().nodes
    assert node.dcgm_profiling is None and "dcgmi not found" in node.dcgm_detail


def subprocess_run(argv: list[str]) -> None:
    import subprocess

    subprocess.run(argv, check=True, capture_output=True, text=True, timeout=60)
