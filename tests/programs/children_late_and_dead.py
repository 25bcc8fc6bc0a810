"""A matched worker, without Ray, whose two engine processes are stopped (SIGSTOP) in one window and killed in the
next: prints, as JSON on its last line, the worker's environment for its children, the children's pids, the first
window's time and every record: `python children_late_and_dead.py <memory dir>`."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time

from nrlprof.config.env import load_plan
from nrlprof.launch.runtime_env import PLAN_VARIABLE, WORKER_VARIABLE, worker_descriptor
from nrlprof.runtime.activation import activate_worker
from nrlprof.runtime.windows.dispatch import apply_in_actor
from nrlprof.runtime.windows.profiler import START, STEP, STOP, Action
from nrlprof.workers.identity import WorkerIdentity
from nrlprof.workers.matching import match_worker


def engine(connection):
    connection.send(os.getpid())
    connection.recv()


def apply(action):
    return [record.as_dict() for record in apply_in_actor(None, (action,)).records]


def window(first, last, inside=lambda: None):
    records = apply(Action("memory", START, first, last, first))
    inside()
    for step in range(first + 1, last + 1):
        records += apply(Action("memory", STEP, step=step))
    return records + apply(Action("memory", STOP))


if __name__ == "__main__":
    directory = sys.argv[1]
    plan = load_plan(
        {
            "NRL_MEMORY_PROFILE_WORKER_PATTERNS": "*generation*",
            "NRL_MEMORY_PROFILE_STEP_RANGE": "1:9",
            "NRL_MEMORY_PROFILE_DIR": directory,
            "NRL_PROFILE_TIMEOUT_S": "1",
        }
    )
    identity = WorkerIdentity("VllmGenerationWorker", None, 3)
    os.environ[PLAN_VARIABLE] = plan.to_json()
    os.environ[WORKER_VARIABLE] = worker_descriptor(identity, match_worker(plan, identity))
    before = {name: os.environ.get(name) for name in ("PYTHONPATH", "NRLPROF_CHANNEL")}
    session = activate_worker(os.environ)
    out = {"environment": {name: os.environ.get(name) for name in before}}
    context = multiprocessing.get_context("spawn")
    pipes = []
    for index in range(2):
        ours, theirs = context.Pipe()
        context.Process(target=engine, args=(theirs,), name=f"EngineCore_{index}", daemon=True).start()
        pipes.append(ours)
    pids = [pipe.recv() for pipe in pipes]
    while len(session.children) < 2:
        time.sleep(0.05)
    out["pids"] = pids
    os.kill(pids[0], signal.SIGSTOP)
    began = time.monotonic()
    first = window(1, 3)
    out["first_window_s"] = time.monotonic() - began
    os.kill(pids[0], signal.SIGCONT)
    time.sleep(1)
    # killed from outside, as by the OOM killer (the worker's own os.kill would close its windows first)
    second = window(5, 6, inside=lambda: (subprocess.run(["kill", "-9", str(pids[1])]), time.sleep(0.5)))
    out["records"] = first + second
    import nrlprof

    nrlprof.disable()
    out["restored"] = {name: os.environ.get(name) for name in before} == before
    print(json.dumps(out))
