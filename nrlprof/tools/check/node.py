"""What `nrlprof doctor` looks at on one node: runs there, inside a task pinned to it.

The interpreters are read from the node's raylet, not assumed from this task: the raylet's command line names
the command it starts workers with (`--python_worker_command`) and the one it starts its runtime-env agent with
(`--runtime_env_agent_command`, whose script lies inside the Ray package the agent imports). The agent runs Ray's
profiler plugins, so the on-disk fix is checked in that Ray package, whichever environment this task runs in.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from nrlprof.backends.cupti_clash import NVTX_INJECTION_VARIABLE
from nrlprof.tools.check.dcgm import profiling_check

NSYS_TOOL = "nsys"
ROCPROF_TOOL = "rocprof-sys-python"
VERSION_TIMEOUT_S = 15.0
WORKER_COMMAND_FLAG = "--python_worker_command="
AGENT_COMMAND_FLAG = "--runtime_env_agent_command="
# Paths of the scripts inside the Ray package that the raylet's commands run.
AGENT_SCRIPT = "_private/runtime_env/agent/main.py"
WORKER_SCRIPT = "_private/workers/setup_worker.py"


@dataclass
class ToolCheck:
    name: str
    path: str | None = None
    version: str | None = None
    detail: str = ""

    @property
    def found(self) -> bool:
        return self.path is not None


@dataclass
class Interpreter:
    """A Python the node's Ray runs: the command as the raylet has it, the binary, and the Ray it imports."""

    command: str = ""  # as configured (may be a venv link or a wrapper such as `uv run ... python`)
    executable: str = ""  # the binary (/proc/<pid>/exe) where a running process was found
    ray_dir: str = ""  # the Ray package directory it runs from
    pid: int | None = None
    detail: str = ""


def tool_check(name: str, timeout_s: float = VERSION_TIMEOUT_S) -> ToolCheck:
    """Where `name` is on PATH and what `name --version` says."""
    check = ToolCheck(name, shutil.which(name))
    if check.path is None:
        check.detail = "not on PATH"
        return check
    try:
        done = subprocess.run(
            [check.path, "--version"], capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        check.detail = f"`{name} --version` did not finish within {timeout_s:.0f}s"
        return check
    except OSError as err:
        check.detail = f"`{name} --version` could not run: {err.strerror or err}"
        return check
    check.version = parse_version(done.stdout + "\n" + done.stderr)
    if done.returncode != 0:
        check.detail = f"`{name} --version` exited with {done.returncode}"
    return check


def nsys_options_here(nsys: ToolCheck) -> tuple[dict[str, list[str]] | None, str]:
    """The options `nsys profile --help` lists here (`{"long": [...], "short": [...]}`), or None and why not."""
    if nsys.path is None:
        return None, "nsys not on PATH"
    from nrlprof.config.nsys.known import read_profile_help

    known, why = read_profile_help(nsys.path)
    if known is None:
        return None, why
    return {"long": sorted(known.long), "short": sorted(known.short)}, ""


def parse_version(text: str) -> str | None:
    """`NVIDIA Nsight Systems version 2025.1.1.103-test` -> `2025.1.1.103-test`; else the first line."""
    match = re.search(r"\bv?(\d+(?:\.\d+)+[\w.+-]*)", text)
    if match:
        return match.group(1)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else None


def cuda_check() -> tuple[bool, str]:
    """A cheap look: the device node, else `nvidia-smi -L`."""
    if os.path.exists("/dev/nvidia0"):
        return True, "/dev/nvidia0"
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False, "no /dev/nvidia0, no nvidia-smi"
    try:
        done = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=VERSION_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as err:
        return False, f"nvidia-smi -L failed: {err}"
    gpus = [line for line in done.stdout.splitlines() if line.startswith("GPU")]
    return (done.returncode == 0 and bool(gpus)), f"nvidia-smi: {len(gpus)} GPU(s)"


def _flag(argv: list[str], prefix: str) -> list[str]:
    for arg in argv:
        if arg.startswith(prefix):
            with contextlib.suppress(ValueError):
                return shlex.split(arg[len(prefix) :])
    return []


def interpreter_of(command: list[str], script: str) -> Interpreter:
    """The command up to (without) the Ray script it runs, `<ray>/<script>` (a wrapper such as `uv run ... python`
    stays whole), and that Ray package dir ('' when the command has no such argument)."""
    cut = next((i for i, arg in enumerate(command) if arg.endswith("/" + script)), len(command))
    ray_dir = command[cut][: -len(script) - 1] if cut < len(command) else ""
    prefix = [a for a in command[:cut] if a != "-u"]
    return Interpreter(command=shlex.join(prefix), ray_dir=ray_dir)


def interpreters(node_id: str) -> dict[str, Any]:
    """Raylet pid, what its agent and workers run, and whether the agent has the fix, read from /proc."""
    from nrlprof.rayfix.node_agent import agent_fix, agent_pid, find_raylet_pid, read_argv, read_environ

    pid = find_raylet_pid(node_id)
    argv: list[str] = []
    if pid is not None:
        with contextlib.suppress(OSError):
            argv = read_argv(pid)
    if not argv:
        detail = "raylet not found among this machine's processes"
        return {"raylet_pid": pid, "raylet_environ": None, "agent_fix": None, "agent_fix_reason": detail,
                "agent": asdict(Interpreter(detail=detail)), "workers": asdict(Interpreter(detail=detail))}  # fmt: skip
    agent = interpreter_of(_flag(argv, AGENT_COMMAND_FLAG), AGENT_SCRIPT)
    workers = interpreter_of(_flag(argv, WORKER_COMMAND_FLAG), WORKER_SCRIPT)
    agent.pid = agent_pid(pid)
    if agent.pid is not None:
        with contextlib.suppress(OSError):
            agent.executable = os.readlink(f"/proc/{agent.pid}/exe")
    workers.pid = os.getpid()
    workers.executable = os.path.realpath(sys.executable)
    workers.detail = f"this check ran in {sys.executable}"
    for found, what in ((agent, "runtime-env agent"), (workers, "worker")):
        if not found.ray_dir:
            found.detail = f"the raylet's {what} command names no Ray script; " + found.detail
    try:
        environ: dict[str, str] | None = read_environ(pid)
    except OSError:
        environ = None
    verdict = agent_fix(pid)
    return {"raylet_pid": pid, "raylet_environ": environ, "agent_fix": verdict.fixed,
            "agent_fix_reason": verdict.reason, "agent": asdict(agent), "workers": asdict(workers)}  # fmt: skip


def agent_check(environ: dict[str, str] | None, raylet_pid: int | None) -> tuple[bool | None, str]:
    """Whether the runtime-env agent's RAY_RUNTIME_ENV_PLUGINS lists nrlprof's hook, and where that was read."""
    from nrlprof.rayfix.plugins_env import PLUGINS_VARIABLE, agent_hook_listed

    if raylet_pid is None:
        return agent_hook_listed(os.environ.get(PLUGINS_VARIABLE)), "raylet not found; judged from a worker"
    if environ is None:
        return None, f"cannot read the environment of raylet pid {raylet_pid}"
    return agent_hook_listed(environ.get(PLUGINS_VARIABLE)), f"environment of raylet pid {raylet_pid}"


def plugin_files_check(ray_dir: str) -> tuple[dict[str, Any], str]:
    """The fix state of Ray's plugin files in `ray_dir` (the agent's Ray), or of the Ray this task imports."""
    try:
        from nrlprof.rayfix.patch_ray import inspect_ray
    except ImportError as err:
        return {}, f"nrlprof.rayfix.patch_ray unavailable: {err}"
    try:
        return inspect_ray(ray_dir or None), f"Ray at {ray_dir}" if ray_dir else "the Ray this check imports"
    except Exception as err:  # a broken Ray install must not hide the other checks
        return {}, f"inspecting Ray's plugin files failed: {type(err).__name__}: {err}"


def writable_check(directory: str) -> tuple[bool, str]:
    """Whether a file can be created in `directory`, or in the nearest existing parent it would be created in."""
    path = Path(directory)
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return False, f"{existing} is not a directory"
    try:
        with tempfile.NamedTemporaryFile(dir=existing, prefix=".nrlprof-doctor-"):
            pass
    except OSError as err:
        return False, f"cannot create a file in {existing}: {err.strerror or err}"
    return True, "writable" if existing == path else f"will be created (under {existing})"


def python_version() -> str:
    return ".".join(str(part) for part in sys.version_info[:3])


def inspect_node(node_id: str, output_dir: str) -> dict[str, Any]:
    """Runs on the node: every check, as plain data."""
    nsys, rocprof = tool_check(NSYS_TOOL), tool_check(ROCPROF_TOOL)
    nsys_options, nsys_options_detail = nsys_options_here(nsys)
    cuda, cuda_detail = cuda_check()
    found = interpreters(node_id)
    raylet_environ = found.pop("raylet_environ")
    agent_hook, agent_detail = agent_check(raylet_environ, found["raylet_pid"])
    files, files_detail = plugin_files_check(found["agent"]["ray_dir"])
    writable, writable_detail = writable_check(output_dir)
    dcgm_profiling, dcgm_detail = profiling_check()
    workers_environ = raylet_environ if raylet_environ is not None else os.environ
    return {
        **found,  # raylet_pid, agent, agent_fix, agent_fix_reason, workers
        "nvtx_injection": workers_environ.get(NVTX_INJECTION_VARIABLE, ""),
        "nsys": asdict(nsys),
        "nsys_options": nsys_options,
        "nsys_options_detail": nsys_options_detail,
        "rocprof": asdict(rocprof),
        "cuda": cuda,
        "cuda_detail": cuda_detail,
        "agent_hook": agent_hook,
        "agent_detail": agent_detail,
        "plugin_files": files,
        "plugin_files_detail": files_detail,
        "output_dir": output_dir,
        "output_writable": writable,
        "output_detail": writable_detail,
        "python_executable": sys.executable,
        "python_version": python_version(),
        "dcgm_profiling": dcgm_profiling,
        "dcgm_detail": dcgm_detail,
    }
