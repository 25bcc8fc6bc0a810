"""Runs inside a worker a window asked for selects: its backend for that window, set up before the window opens.

A worker a pattern matched at its creation has a Session: the backend joins it. Any other worker gets a Session of
its own for windows asked for (`state.on_demand`), beside the one it may have as a possible controller; the window
actions of nrlprof.runtime.windows.dispatch reach it there. Its files and records are those of a matched worker.
"""

from __future__ import annotations

from nrlprof.config.plan import Plan
from nrlprof.launch.runtime_env import parse_worker_descriptor
from nrlprof.log import configure_logging
from nrlprof.process import state
from nrlprof.process.kind import WORKER
from nrlprof.runtime.session import Session


def enable_in_actor(_actor_instance: object, plan_json: str, descriptor: str, kind: str) -> bool:
    """This worker's `kind` backend, ready for the window asked for; True once it is."""
    plan = Plan.from_json(plan_json)
    identity, targets = parse_worker_descriptor(descriptor)
    target = targets[kind]
    backend_plan = plan.backend(kind)
    session = state.session
    if session is None or session.kind != WORKER:
        session = state.on_demand
    if session is None:
        configure_logging(plan.log_level)
        session = state.on_demand = Session(plan, identity, {kind: target}, kind=WORKER)
    else:
        session.targets.setdefault(kind, target)
        session.process.add_backend(kind, backend_plan, target)
    session.process.backends[kind].ready_for_asked()  # built now, not in the window's first action
    return True
