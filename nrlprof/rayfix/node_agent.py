"""What this node's raylet gave its runtime-env agent: read from `/proc`, without asking Ray.

The raylet starts the agent with its own environment (`RAY_RUNTIME_ENV_PLUGINS`) and a command line naming the
agent's interpreter and Ray package (`--runtime_env_agent_command=<python> -u <ray>/_private/runtime_env/agent/main.py
...`). The agent's own `/proc/<pid>/environ` is not read: the agent renames its process title, which overwrites
part of that area.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

from nrlprof.rayfix import names, patch_ray
from nrlprof.rayfix.plugins_env import agent_hook_listed

PROC = Path("/proc")
AGENT_COMMAND_OPTION = "--runtime_env_agent_command="
NODE_ID_OPTION = "--node_id="
AGENT_MAIN = ("_private", "runtime_env", "agent", "main.py")
AGENT_TITLE = "ray::RuntimeEnvAgent"


@dataclass(frozen=True)
class AgentFix:
    """Whether the agent builds the fixed profiler command: True, False, or None when it cannot be told."""

    fixed: bool | None
    reason: str


def read_argv(pid: int) -> list[str]:
    return (PROC / str(pid) / "cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]


def read_environ(pid: int) -> dict[str, str]:
    items = (PROC / str(pid) / "environ").read_bytes().decode(errors="replace").split("\0")
    return dict(item.partition("=")[::2] for item in items if item)


def raylet_pids() -> dict[str, int]:
    """Node id -> pid of every raylet running on this machine, in one pass over `/proc`."""
    found: dict[str, int] = {}
    for entry in PROC.iterdir() if PROC.is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            argv = read_argv(int(entry.name))
        except OSError:
            continue
        if argv and os.path.basename(argv[0]) == "raylet":
            node_id = next((arg[len(NODE_ID_OPTION) :] for arg in argv if arg.startswith(NODE_ID_OPTION)), None)
            if node_id:
                found[node_id] = int(entry.name)
    return found


def find_raylet_pid(node_id: str) -> int | None:
    """The pid of the raylet of node `node_id` if it runs on this machine."""
    return raylet_pids().get(node_id)


def agent_ray_dir(raylet_argv: list[str]) -> Path | None:
    """The Ray package the agent imports, from the agent command the raylet was given."""
    command = next(
        (arg[len(AGENT_COMMAND_OPTION) :] for arg in raylet_argv if arg.startswith(AGENT_COMMAND_OPTION)), ""
    )
    for word in command.split():
        path = Path(word)
        if path.parts[-len(AGENT_MAIN) :] == AGENT_MAIN:
            return path.parents[len(AGENT_MAIN) - 1]
    return None


def agent_pid(raylet_pid: int) -> int | None:
    """The runtime-env agent: the raylet's child running `.../runtime_env/agent/main.py`.

    The agent renames its process title to `ray::RuntimeEnvAgent` once started, so both forms are recognised.
    """
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            if parent != raylet_pid:
                continue
            argv = read_argv(int(entry.name))
            if (argv and argv[0].startswith(AGENT_TITLE)) or any(a.endswith(os.path.join(*AGENT_MAIN)) for a in argv):
                return int(entry.name)
        except (OSError, ValueError, IndexError):
            continue
    return None


def started_at(pid: int) -> float | None:
    """The process's start time, seconds since the epoch."""
    try:
        ticks = int((PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[19])
        boot = next(
            int(line.split()[1]) for line in (PROC / "stat").read_text().splitlines() if line.startswith("btime ")
        )
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def plugin_files_fix(ray_dir: Path, agent_started: float | None) -> AgentFix:
    """The on-disk route: every plugin file present is patched or upstream-fixed, and was so when the agent started."""
    states = [patch_ray.inspect_file(ray_dir, plugin) for plugin in patch_ray.PLUGINS]
    unfixed = [s for s in states if s.state not in (*names.FIXED_STATES, names.MISSING)]
    if unfixed:
        return AgentFix(False, "; ".join(s.describe() for s in unfixed))
    if agent_started is not None:
        # One second of slack: file times and process start times are taken from different clocks' roundings.
        newer = [
            s for s in states if s.path is not None and s.path.exists() and s.path.stat().st_mtime > agent_started + 1
        ]
        if newer:
            where = ", ".join(str(s.path) for s in newer)
            return AgentFix(False, f"{where} changed after the runtime-env agent started; restart Ray on this node")
    return AgentFix(True, f"Ray's plugin files under {ray_dir} are fixed")


def agent_fix(raylet_pid: int) -> AgentFix:
    """Judge the runtime-env agent of the raylet `raylet_pid`: the in-memory hook, else the plugin files it imports."""
    try:
        environ: dict[str, str] | None = read_environ(raylet_pid)
    except OSError:
        environ = None
    if environ is not None and agent_hook_listed(environ.get(names.PLUGINS_VARIABLE)):
        return AgentFix(
            True, f"the raylet (pid {raylet_pid}) lists {names.HOOK_CLASS_PATH} in {names.PLUGINS_VARIABLE}"
        )
    try:
        ray_dir = agent_ray_dir(read_argv(raylet_pid))
    except OSError as err:
        return AgentFix(None, f"cannot read the command line of raylet pid {raylet_pid}: {err.strerror or err}")
    if ray_dir is None:
        return AgentFix(None, f"raylet pid {raylet_pid} names no runtime-env agent command")
    agent = agent_pid(raylet_pid)
    verdict = plugin_files_fix(ray_dir, None if agent is None else started_at(agent))
    if verdict.fixed is False and environ is None:
        return AgentFix(None, f"{verdict.reason}; the raylet's environment (pid {raylet_pid}) is not readable")
    return verdict


def judge_node(node_id: str) -> AgentFix:
    """The fix of node `node_id`'s agent, judged on the machine its raylet runs on (a task pinned to that node)."""
    raylet_pid = find_raylet_pid(node_id)
    if raylet_pid is None:
        return AgentFix(None, f"the raylet of node {node_id} is not among the processes of {socket.gethostname()}")
    return agent_fix(raylet_pid)
