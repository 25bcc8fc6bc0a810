"""Runs inside a worker a window asked for selects: its backend for that window, set up before the window opens.

A worker a pattern matched at its creation has a Session: the backend joins it. Any other worker gets a Session of
its own for windows asked for (`state.on_demand`), beside the one it may have as a possible controller; the window
actions of nrlprof.runtime.windows.dispatch reach it there. Its files and records are those of a matched worker.

The Python processes the worker started join too: in an armed job every Ray worker listens for them from its start
(nrlprof.runtime.children.channel), and they add the backend before the window's first action reaches them.
"""

from __future__ import annotations

from nrlprof.config.plan import NSYS, Plan
from nrlprof.launch.runtime_env import parse_worker_descriptor
from nrlprof.log import configure_logging
from nrlprof.process import state
from nrlprof.process.kind import WORKER
from nrlprof.runtime.session import Session


def enable_in_actor(_actor_instance: object, plan_json: str, descriptor: str, kind: str) -> bool:
    """This worker's `kind` backend, ready for the window asked for; True once it is."""
    plan = Plan.from_json(plan_json)
    worker = parse_worker_descriptor(descriptor)
    identity, target = worker.identity, worker.targets[kind]
    backend_plan = plan.backend(kind)
    session = state.session
    if session is None or session.kind != WORKER:
        session = state.on_demand
    if session is None:
        configure_logging(plan.log_level)
        session = state.on_demand = Session(plan, identity, {kind: target}, kind=WORKER)
        if state.session is None:  # nothing ran at this worker's start: annotate reads the windows there
            state.session = session
        else:  # one process, one set of open windows: annotate and method ranges read the host's
            session.windows = state.session.windows
        _take_children(session)
    else:
        session.targets.setdefault(kind, target)
        session.process.add_backend(kind, backend_plan, target)
    session.process.backends[kind].ready_for_asked()  # built now, not in the window's first action
    _enable_children(session, plan_json, descriptor, kind)
    return True


def _take_children(session: Session) -> None:
    """The channel this worker opened as a possible controller at its start, now the on-demand Session's, which
    names the worker to it."""
    host = state.session
    channel = None if host is None else host.children
    if channel is None:
        return
    session.children = channel
    if not channel.bound:
        role = session.process.role
        channel.bind(session.identity.name, session.identity.rank, role.node_ip, session.process.write_manifest)


def _enable_children(session: Session, plan_json: str, descriptor: str, kind: str) -> None:
    """The processes this worker started add the backend (nsys stays out: its children are launched under it)."""
    channel = session.children
    if channel is None or kind == NSYS:
        return
    from nrlprof.runtime.children.protocol import Enable

    role = session.process.role
    channel.enable(Enable(plan_json, descriptor, kind, role.session_dir, role.node_ip))
