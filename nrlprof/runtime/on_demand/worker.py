"""Runs inside a worker a window asked for selects: its backend for that window, set up before the window opens, in
the process's one Session (`Session.profile_as`); the processes it started add the backend too."""

from __future__ import annotations

from nrlprof.config.plan import NSYS, Plan
from nrlprof.launch.runtime_env import parse_worker_descriptor
from nrlprof.log import configure_logging
from nrlprof.process import state
from nrlprof.process.kind import WORKER
from nrlprof.runtime.children.protocol import Enable
from nrlprof.runtime.session import Session


def enable_in_actor(_actor_instance: object, plan_json: str, descriptor: str, kind: str) -> bool:
    """This worker's `kind` backend, ready for the window asked for; True once it is."""
    plan = Plan.from_json(plan_json)
    worker = parse_worker_descriptor(descriptor)
    identity, target = worker.identity, worker.targets[kind]
    session = state.session
    if session is None:
        configure_logging(plan.log_level)
        session = state.session = Session(plan, identity, {}, kind=WORKER)
    session.profile_as(identity, kind, plan.backend(kind), target)
    session.process.backends[kind].ready_for_asked()  # built now, not in the window's first action
    channel = session.children
    if channel is not None and kind != NSYS:  # nsys stays out: its children are launched under it
        role = session.process.role
        if not channel.bound:
            channel.bind(identity.name, identity.rank, role.node_ip, session.process.write_manifest)
        channel.enable(Enable(plan_json, descriptor, kind, role.session_dir, role.node_ip))
    return True
