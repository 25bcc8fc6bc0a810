"""A matched worker, without Ray, whose engine process is killed after a torch window stopped, before its trace was
final (its finishing takes a minute here). Prints, as JSON on its last line, the child's pid and the records the
worker's window actions returned: `python child_dies_after_stop.py <torch dir>`."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import time

from nrlprof.config.env import load_plan
from nrlprof.launch.runtime_env import PLAN_VARIABLE, WORKER_VARIABLE, worker_descriptor
from nrlprof.runtime.activation import activate_worker
from nrlprof.runtime.windows.dispatch import apply_in_actor
from nrlprof.runtime.windows.profiler import SETTLE, START, STEP, STOP, Action
from nrlprof.workers.identity import WorkerIdentity
from nrlprof.workers.matching import match_worker

FINISH_S = 120.0


def engine(connection) -> None:
    """The engine process: torch imported (its windows record), its traces slow to finish."""
    import torch  # noqa: F401

    from nrlprof.backends import torch_profiler

    written = torch_profiler._write_valid

    def slowly_written(*args):
        time.sleep(FINISH_S)
        return written(*args)

    torch_profiler._write_valid = slowly_written
    connection.send(os.getpid())
    connection.recv()


def apply(action: Action) -> list[dict]:
    return [record.as_dict() for record in apply_in_actor(None, (action,)).records]


def main(torch_dir: str) -> None:
    plan = load_plan({"NRL_TORCH_PROFILE_WORKER_PATTERNS": "*generation*", "NRL_TORCH_PROFILE_STEP_RANGE": "1:3",
                      "NRL_TORCH_PROFILE_DIR": torch_dir, "NRL_PROFILE_TIMEOUT_S": "60"})  # fmt: skip
    identity = WorkerIdentity("VllmGenerationWorker", None, 3)
    os.environ[PLAN_VARIABLE] = plan.to_json()
    os.environ[WORKER_VARIABLE] = worker_descriptor(identity, match_worker(plan, identity))
    session = activate_worker(os.environ)
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    context.Process(target=engine, args=(theirs,), name="EngineCore_0", daemon=True).start()
    pid = ours.recv()
    while len(session.children) < 1:
        time.sleep(0.05)
    records = apply(Action("torch", START, 1, 2, 1))
    records += apply(Action("torch", STEP, step=2))
    records += apply(Action("torch", STOP))
    # Killed from outside, as by the OOM killer (the worker's own os.kill would wait for its files first).
    subprocess.run(["kill", "-9", str(pid)], check=True)
    records += apply(Action("torch", SETTLE))
    print(json.dumps({"pid": pid, "records": records}))


if __name__ == "__main__":
    main(sys.argv[1])
