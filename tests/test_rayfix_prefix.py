"""The py_executable prefix and the agent verdict without a cluster: the script as bash runs it, the plugin files."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
import ray
from helpers import clusters

from nrlprof.rayfix import cluster_fix, node_agent, patch_ray
from nrlprof.rayfix.worker_prefix import SCRIPT_NAME, worker_prefix

RAY_RUNTIME_ENV = Path(ray.__file__).parent / "_private" / "runtime_env"


def run_like_ray(py_executable: str, worker_args: list[str], path: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """What Ray's setup_worker does: `bash -c "exec <py_executable> <quoted args>"`."""
    command = "exec " + py_executable + " " + " ".join(shlex.quote(a) for a in worker_args)
    env = {"PATH": path, "HOME": str(tmp_path)}
    return subprocess.run(["bash", "-c", command], env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path)


def recording_tool(bin_dir: Path, name: str) -> None:
    """A tool that prints its argv (one JSON line) and the environment it was given: one line that runs
    tests/programs/recording_tool.py."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    tool = bin_dir / name
    program = Path(__file__).parent / "programs" / "recording_tool.py"
    tool.write_text(f'#!/bin/sh\nexec {shlex.join([sys.executable, str(program)])} "$@"\n')
    tool.chmod(0o755)


def test_nsys_prefix_finds_the_session_dir_in_the_worker_arguments(tmp_path: Path) -> None:
    recording_tool(tmp_path / "bin", "nsys")
    prefix = worker_prefix({"t": "cuda,nvtx", "o": "a b;$(x)_%p", "flags": ["cuda-graph-trace=node"]}, None, "/v/py")
    args = ["/ray/default_worker.py", "--temp-dir=/tmp/t x", "--session-name=session_1", "--x=1"]

    done = run_like_ray(prefix, args, f"{tmp_path / 'bin'}:/usr/bin:/bin", tmp_path)

    assert done.returncode == 0, done.stderr
    argv = json.loads(done.stdout)["argv"]
    assert argv == [
        "profile", "-t", "cuda,nvtx", "-o", "/tmp/t x/session_1/logs/nsight/a b;$(x)_%p", "--cuda-graph-trace=node",
        "/v/py", *args,
    ]  # fmt: skip
    assert prefix.endswith(f" {SCRIPT_NAME}")


def test_prefix_without_the_tool_runs_the_interpreter_and_says_why(tmp_path: Path) -> None:
    recording_tool(tmp_path / "bin", "python-standin")
    prefix = worker_prefix({"t": "cuda"}, None, str(tmp_path / "bin" / "python-standin"))
    args = ["/ray/default_worker.py", f"--temp-dir={tmp_path}", "--session-name=s"]

    done = run_like_ray(prefix, args, "/usr/bin:/bin", tmp_path)

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["argv"] == args
    assert "runs without profiling: nsys is not on PATH" in done.stderr


def test_rocprof_prefix_passes_the_interpreter_and_output_dir(tmp_path: Path) -> None:
    recording_tool(tmp_path / "bin", "rocprof-sys-python")
    prefix = worker_prefix(None, {"args": {"F": "true"}, "env": {"ROCPROFSYS_OUTPUT_PREFIX": "w %p"}}, "/v/py")
    args = ["/ray/default_worker.py", f"--temp-dir={tmp_path}", "--session-name=s"]

    done = run_like_ray(prefix, args, f"{tmp_path / 'bin'}:/usr/bin:/bin", tmp_path)

    out = json.loads(done.stdout)
    assert out["argv"] == ["-F", "true", "--", *args]
    assert out["env"]["PYTHON_EXECUTABLE"] == "/v/py"
    assert out["env"]["ROCPROFSYS_OUTPUT_PREFIX"] == "w %p"
    assert out["env"]["ROCPROFSYS_OUTPUT_PATH"] == str(tmp_path / "s" / "logs" / "rocprof_sys")
    assert (tmp_path / "s" / "logs" / "rocprof_sys").is_dir()


def test_prefixed_runtime_env_replaces_the_profiler_fields_only() -> None:
    env = {"_nsight": {"t": "cuda"}, "env_vars": {"A": "1"}, "py_executable": "uv run python", "working_dir": "."}
    prefixed = cluster_fix.prefixed_runtime_env(env)
    assert "_nsight" not in prefixed and prefixed["working_dir"] == "."
    assert prefixed["env_vars"] == {"A": "1", cluster_fix.INTERPRETER_VARIABLE: "uv run python"}
    script = shlex.split(prefixed["py_executable"])[2]
    assert 'exec nsys profile -t cuda -o "$logs/nsight"/worker_process_%p uv run python "$@"' in script
    assert env == {
        "_nsight": {"t": "cuda"},
        "env_vars": {"A": "1"},
        "py_executable": "uv run python",
        "working_dir": ".",
    }


@pytest.mark.parametrize(
    "env",
    [{}, {"env_vars": {"A": "1"}}, {"_nsight": None}, {"_nsight": {"t": "cuda"}, "pip": ["x"]}, {"_nsight": 3}],
)
def test_prefixed_runtime_env_leaves_what_it_cannot_prefix(env: dict) -> None:
    assert cluster_fix.prefixed_runtime_env(env) is env


def test_a_prefixed_workers_prefix_is_not_nested() -> None:
    """A runtime_env already carrying nrlprof's prefix (as a child inherits it) is prefixed around the original."""
    first = cluster_fix.prefixed_runtime_env({"_nsight": {"t": "cuda"}, "py_executable": "/v/py"})
    second = cluster_fix.prefixed_runtime_env({**first, "_nsight": {"t": "nvtx"}})
    script = shlex.split(second["py_executable"])[2]
    assert script.count("nsys profile") == 1 and 'exec nsys profile -t nvtx -o "$logs/nsight"/' in script
    assert second["env_vars"][cluster_fix.INTERPRETER_VARIABLE] == "/v/py"


def test_agent_has_fix_is_none_without_ray() -> None:
    clusters.disconnect()  # the test process may still be on the suite's shared cluster
    assert not ray.is_initialized()
    assert cluster_fix.agent_has_fix() is None


# --- the agent's plugin files ---------------------------------------------------------------------------------


def test_agent_ray_dir_from_the_raylet_command_line(ray_dir: Path) -> None:
    main = ray_dir / "_private" / "runtime_env" / "agent" / "main.py"
    argv = ["raylet", "--node_id=x", f"--runtime_env_agent_command=/v/bin/python -u {main} --node-id=x --a=b"]
    assert node_agent.agent_ray_dir(argv) == ray_dir
    assert node_agent.agent_ray_dir(["raylet", "--node_id=x"]) is None


def test_plugin_files_judged_against_the_agent_start(ray_dir: Path) -> None:
    unpatched = node_agent.plugin_files_fix(ray_dir, None)
    assert unpatched.fixed is False and "unpatched" in unpatched.reason

    started = time.time() - 60
    assert patch_ray.main(["--ray-dir", str(ray_dir)]) == 0
    late = node_agent.plugin_files_fix(ray_dir, started)
    assert late.fixed is False and "changed after the runtime-env agent started" in late.reason

    for path in (ray_dir / "_private" / "runtime_env").glob("*.py"):
        os.utime(path, (started - 60, started - 60))
    assert node_agent.plugin_files_fix(ray_dir, started).fixed is True
    assert node_agent.plugin_files_fix(ray_dir, None).fixed is True
