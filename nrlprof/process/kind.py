"""What this process is to nrlprof, read from its arguments and environment alone (nothing imported).

- `worker`: a Ray worker process of a matched actor (Ray set NRLPROF_WORKER in its runtime env).
- `controller`: any other Ray worker process. It may turn out to be the job's controller (verl's
  TaskRunner creates the worker groups and runs the training loop); it becomes one at its first step.
- `driver`: a program started by the user.
- `child`: a process started by a Ray worker (a controller or a matched worker) after nrlprof activated
  there (a DataLoader worker, an inference engine's process): it is not a driver of its own. A matched
  worker's children join its windows (nrlprof.runtime.children.join); a controller's stay inert. A driver's own
  children may be drivers (a launcher, a sweep script); they activate lazily, as every driver does.
- None: nrlprof stays inert (the `nrlprof` CLI, Ray's own processes, NRL_PROFILE_DISABLE=1).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

from nrlprof.config.variables import DISABLE_VARIABLE, PARENT_VARIABLE, WORKER_VARIABLE

WORKER, CONTROLLER, DRIVER, CHILD = "worker", "controller", "driver", "child"
RAY_WORKER_SCRIPT = os.path.join("ray", "_private", "workers", "default_worker.py")
_RAY_PACKAGE_PART = f"{os.sep}ray{os.sep}"
RAY_COMMANDS = ("ray", "serve")


def disabled(environ: Mapping[str, str]) -> bool:
    return (environ.get(DISABLE_VARIABLE) or "").strip() == "1"


def launched_as_cli(argv: Sequence[str], orig_argv: Sequence[str]) -> bool:
    """`nrlprof ...` or `python -m nrlprof ...`: the tools read the plan themselves.

    While a module given to `-m` imports, `sys.argv[0]` is `-m` for every module; only the interpreter's
    own arguments say which module runs.
    """
    if argv and os.path.basename(argv[0]) == "nrlprof":
        return True
    for index, argument in enumerate(orig_argv[:-1]):
        if argument == "-m":
            return orig_argv[index + 1] in ("nrlprof", "nrlprof.cli")
    return False


def is_ray_worker(argv: Sequence[str]) -> bool:
    return bool(argv) and argv[0].endswith(RAY_WORKER_SCRIPT)


def is_ray_internal(argv: Sequence[str]) -> bool:
    """Ray's command line, or one of its own processes (runtime-env agent, dashboard, log monitor)."""
    if not argv:
        return False
    script = argv[0]
    return os.path.basename(script) in RAY_COMMANDS or (_RAY_PACKAGE_PART in script and script.endswith(".py"))


def started_by_profiled_process(environ: Mapping[str, str], pid: int) -> bool:
    """Set by a controller or matched worker for the processes it starts (their pid differs)."""
    parent = (environ.get(PARENT_VARIABLE) or "").strip()
    return bool(parent) and parent != str(pid)


def process_kind(
    environ: Mapping[str, str] = os.environ,
    argv: Sequence[str] | None = None,
    orig_argv: Sequence[str] | None = None,
    pid: int | None = None,
) -> str | None:
    argv = sys.argv if argv is None else argv
    orig_argv = getattr(sys, "orig_argv", argv) if orig_argv is None else orig_argv
    pid = os.getpid() if pid is None else pid
    if disabled(environ) or launched_as_cli(argv, orig_argv):
        return None
    if is_ray_worker(argv):
        return WORKER if environ.get(WORKER_VARIABLE) else CONTROLLER
    if is_ray_internal(argv):
        return None
    if environ.get(WORKER_VARIABLE) or started_by_profiled_process(environ, pid):
        return CHILD
    return DRIVER
