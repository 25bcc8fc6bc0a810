"""Activating nrlprof in a process, as what the process is: a driver, a Ray worker that may be the controller
(a `Controller`), a matched worker, a process a worker started, or a worker a window asked for selects (a
`ProfiledProcess`). The one composition root: only this module builds them, and hands each what it calls back. What
needs Ray waits for `import ray` (activation at interpreter start-up imports nothing heavy). `deactivate()` closes
the windows, removes every patch and clears the process's part. Activating a driver again reconfigures its same
Controller: its open windows close (their files are kept) and it then behaves exactly like a first activation.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from nrlprof.anatomy.settings import anatomy_settings
from nrlprof.config.plan import Plan, Target
from nrlprof.config.variables import JOB_PLAN_VARIABLE, PARENT_VARIABLE, driver_configured
from nrlprof.errors import ConfigError
from nrlprof.launch.runtime_env import PLAN_VARIABLE, WORKER_VARIABLE, parse_worker_descriptor
from nrlprof.log import configure_logging, logger
from nrlprof.process import import_hooks, state
from nrlprof.process.kind import CHILD, CONTROLLER, DRIVER, WORKER
from nrlprof.process.lifecycle import LIFECYCLE
from nrlprof.rayapi import in_worker_process
from nrlprof.runtime.controller import Controller, FrameworkConfig, Stoppable
from nrlprof.runtime.profiled import ProfiledProcess

if TYPE_CHECKING:
    from nrlprof.runtime.children.protocol import ChannelInfo


def _resolved(plan: Plan) -> Plan:
    """Relative output directories resolved against the driver's working directory."""
    torch_settings = replace(plan.torch, directory=str(Path(plan.torch.directory).expanduser().resolve()))
    backends = tuple(
        replace(b, output_dir=str(Path(b.output_dir).expanduser().resolve())) if b.output_dir else b
        for b in plan.backends
    )
    on_demand = plan.on_demand
    if on_demand is not None:
        on_demand = replace(on_demand, memory_dir=str(Path(on_demand.memory_dir).expanduser().resolve()))
    return replace(plan, torch=torch_settings, backends=backends, on_demand=on_demand)


def _controller_targets(plan: Plan) -> dict[str, Target | None]:
    return {b.kind: None for b in plan.backends if b.controller and b.steps is not None}


def activate_driver(plan: Plan, plan_source: str = "NRL_TORCH_PROFILE_DIR", kind: str = DRIVER) -> Controller | None:
    """Validate, then activate a driver (or an actor that may be the controller).

    The agent hook goes into the environment now (a cluster this process starts inherits it); the Ray hooks
    are installed when `ray` is imported. A process that already has a Controller reconfigures it.
    """
    configure_logging(plan.log_level)
    session = state.session
    if session is not None and session.follows_windows:
        logger.info("this process follows its worker's windows (the driver's plan): a configuration made in it is "
                    "not applied")  # fmt: skip
        return None
    anatomy_config = anatomy_settings(os.environ, plan.active)
    if not (plan.configured or anatomy_config.enabled):
        return state.session
    plan = _resolved(plan)
    _prepare_output_dirs(plan, plan_source)
    if session is not None and session.kind != WORKER:
        session.finish()  # its windows close in the lifecycle's order, while its closers are in place
    _remove_hooks()
    anatomy = None
    if anatomy_config.enabled:
        from nrlprof.anatomy.recorder import Recorder

        anatomy = Recorder(anatomy_config)
    # The job's card (`nrlprof capture --list`), and windows asked for where NRL_PROFILE_ON_DEMAND is set.
    listen = _start_listening if plan.armed else None
    if isinstance(session, Controller) and session.kind != WORKER:
        session.reconfigure(plan, _controller_targets(plan), anatomy, listen)
    else:
        session = Controller(plan, _controller_targets(plan), kind, anatomy, listen, configure_quietly)
    if plan.active and session.kind == DRIVER:
        from nrlprof.rayfix.plugins_env import install_agent_hook

        install_agent_hook(os.environ)
    state.session = session
    from nrlprof import adapters

    adapters.install(session)
    import_hooks.when_imported("ray", "nrlprof's Ray hooks", lambda _ray: _on_ray_imported(session))
    return session


def _start_listening(controller: Controller) -> Stoppable:
    from nrlprof.runtime.on_demand.listener import start_listening

    return start_listening(controller, enable_in_actor)


def configure_quietly(config: FrameworkConfig) -> Controller | None:
    """Activate from a verl/RLinf-style mapping, or a Plan a framework adapter built from the framework's own
    settings (SkyRL's, AReaL's, slime's); NRL_* variables override it. A framework adapter reading the framework's
    own config calls this (it is late by design); `nrlprof.configure` also says what came late."""
    from nrlprof.config.env import TORCH_DIR_VARIABLE, plan_from_env
    from nrlprof.config.yaml_config import plan_from_mapping

    source = TORCH_DIR_VARIABLE if TORCH_DIR_VARIABLE in os.environ else "profiling config (torch trace directory)"
    base = config if isinstance(config, Plan) else plan_from_mapping(config)
    return activate_driver(plan_from_env(os.environ, base=base), source)


def configure_late(config: FrameworkConfig) -> None:
    """`nrlprof.configure`: as `configure_quietly`, and one log line when a framework's modules were imported
    before it (they are patched now; what cannot change that late)."""
    session = configure_quietly(config)
    if session is not None:
        from nrlprof import adapters

        adapters.tell_late(session)


def _on_ray_imported(session: ProfiledProcess) -> None:
    """What needs Ray: the actor-creation hook, the job's end; a controller's step marker, the job's environment, the
    log lines (in a child, the actors it creates are known, and a planned window makes them its worker's engines')."""
    if state.session is not session:
        return
    from nrlprof.runtime import creation_hook, job_end

    creation_hook.install(session)
    job_end.install(session)
    if not isinstance(session, Controller):
        return
    from nrlprof.runtime.steps import call_hook

    call_hook.install(session)
    if session.kind != DRIVER:
        mark_children()
    if session.kind == CONTROLLER and session.plan.on_demand is not None:
        from nrlprof.ranges import method_ranges

        method_ranges.install(None)  # named when a window asked for selects this worker
        _listen_for_children(session)
    if session.kind == DRIVER:
        from nrlprof.runtime import job_env

        job_env.install(session)
        if session.anatomy is not None and not session.anatomy.started:
            session.anatomy.start()
        _warn_if_cluster_already_running(session)
        _log_plan(session.plan)


def mark_children() -> None:
    """Processes this Ray worker starts (a DataLoader's, an engine's) are no drivers of their own (a driver's own
    children are left alone: a launcher or a sweep script starts drivers that way)."""
    os.environ[PARENT_VARIABLE] = str(os.getpid())


def activate_controller(environ: Mapping[str, str]) -> Controller | None:
    """In a Ray worker that no pattern matched: the plan the driver forwarded, or the variables it inherited. Nothing
    is logged until it steps; a bad setting is logged, never raised (the driver validated it)."""
    try:
        text = environ.get(JOB_PLAN_VARIABLE)
        if text:
            plan = Plan.from_json(text)
        else:
            from nrlprof.config.env import load_plan

            plan = load_plan(environ)
        return activate_driver(plan, kind=CONTROLLER)
    except Exception as err:
        configure_logging("INFO")
        logger.error("nrlprof could not activate in this Ray worker; it creates and steps no profiled worker: %s", err)
        return None


def activate_worker(environ: Mapping[str, str] = os.environ) -> ProfiledProcess | None:
    """In a matched worker (run by its setup hook): its backends, and the hook for the actors it creates. Activated
    before the worker has joined Ray, it builds its backends when its setup hook runs (Ray's session directory is
    known then: the manifests and the children's channel need it)."""
    if state.session is not None:
        if state.session.kind == WORKER and not _before_ray_connects():
            _when_connected(state.session)
        return state.session
    plan_text, worker_text = environ.get(PLAN_VARIABLE), environ.get(WORKER_VARIABLE)
    if not plan_text or not worker_text:
        return None
    plan = Plan.from_json(plan_text)
    descriptor = parse_worker_descriptor(worker_text)
    identity, targets = descriptor.identity, descriptor.targets
    configure_logging(plan.log_level)
    from nrlprof import adapters
    from nrlprof.ranges import method_ranges
    from nrlprof.runtime import creation_hook, job_end

    session = ProfiledProcess(plan, identity, targets, WORKER, gated_by_parent=descriptor.parent is not None)
    creation_hook.install(session)
    job_end.install(session)
    method_ranges.install(identity.name)
    state.session = session
    adapters.install(session)
    mark_children()
    if not _before_ray_connects():
        _when_connected(session)
    return session


def enable_in_actor(_actor_instance: object, plan_json: str, descriptor: str, kind: str) -> bool:
    """Runs inside a worker a window asked for selects: its `kind` backend, ready before the window opens, in the
    process's one part (`profile_as`); the processes it started add the backend too. True once it is."""
    from nrlprof.config.plan import NSYS
    from nrlprof.runtime.children.protocol import Enable

    plan = Plan.from_json(plan_json)
    worker = parse_worker_descriptor(descriptor)
    identity, target = worker.identity, worker.targets[kind]
    session = state.session
    if session is None:
        configure_logging(plan.log_level)
        session = state.session = ProfiledProcess(plan, identity, {}, WORKER)
    session.profile_as(identity, kind, plan.backend(kind), target)
    session.process.backends[kind].ready_for_asked()  # built now, not in the window's first action
    channel = session.children
    if channel is not None and kind != NSYS:  # nsys stays out: its children are launched under it
        role = session.process.role
        if not channel.bound:
            channel.bind(identity.name, identity.rank, role.node_ip, session.process.write_manifest)
        channel.enable(Enable(plan_json, descriptor, kind, role.session_dir, role.node_ip))
    return True


def activate_child(environ: Mapping[str, str] = os.environ, forked: bool = False) -> ProfiledProcess | None:
    """In a process a matched worker (or any Ray worker of an armed job) started: it joins the worker's windows, when
    nrlprof.runtime.children.join says it can; None where it does not."""
    if state.session is not None:
        return state.session
    from nrlprof.runtime.children.join import join_worker

    return join_worker(environ, forked, _join_child)


def _join_child(environ: Mapping[str, str], info: ChannelInfo) -> ProfiledProcess | None:
    from nrlprof.runtime.children.join import ParentLink, child_targets

    plan_text, worker_text = environ.get(PLAN_VARIABLE), environ.get(WORKER_VARIABLE)
    if plan_text and worker_text:
        plan = Plan.from_json(plan_text)
        worker = parse_worker_descriptor(worker_text)
        configure_logging(plan.log_level)
        session = ProfiledProcess(plan, worker.identity, child_targets(worker.targets, plan), CHILD)
    else:  # the worker was matched by no pattern: who it is comes with a window asked for
        session = ProfiledProcess(Plan(), None, {}, CHILD)
    link = ParentLink(session, info, enable_in_actor)
    if not link.connect():
        return None
    session.parent_link = link
    state.session = session
    import_hooks.when_imported("ray", "nrlprof's creation hook in a child", lambda _ray: _on_ray_imported(session))
    link.start()
    return session


def _before_ray_connects() -> bool:
    """A Ray worker process at interpreter start-up: its setup hook runs once it has joined the cluster."""
    from nrlprof.process.kind import is_ray_worker

    ray = sys.modules.get("ray")
    return is_ray_worker(sys.argv) and (ray is None or not ray.is_initialized())


def _when_connected(session: ProfiledProcess) -> None:
    """Once Ray has connected a matched worker: engines' own profiler switches, the processes it starts joining its
    windows (planned, or asked for in an armed job); with NRL_MEMORY_PROFILE_ON_OOM=1, allocator history kept from
    its CUDA start."""
    if session.engines is not None:
        return
    from nrlprof.runtime.children.engine_switches import EngineSwitches

    process = session.process
    session.engines = EngineSwitches(process.role, process.write_manifest)
    gated = any(b.steps is not None for kind in session.targets if (b := session.plan.backend(kind)) is not None)
    if gated or session.plan.on_demand is not None:
        _listen_for_children(session)
    memory = process.backends.get("memory")
    if memory is not None and memory.on_oom:
        from nrlprof.backends.memory import arm_oom_snapshot

        arm_oom_snapshot(memory)


def _listen_for_children(session: ProfiledProcess) -> None:
    """The processes this Ray worker starts find its channel; a worker no pattern matched (a possible controller of
    an armed job) learns who it is at its first window asked for (`enable_in_actor`)."""
    try:
        from nrlprof.runtime.children import ending as child_ending
        from nrlprof.runtime.children.channel import open_children
        from nrlprof.runtime.children.join import install_fork_handler

        worker = session.process if session.kind == WORKER else None
        session.children = open_children(session.children, session.plan, worker)
        child_ending.install(session)
        install_fork_handler(_join_child)
    except Exception as err:  # the worker itself is profiled all the same
        logger.warning("the processes this worker starts will not join its windows: %s", err)


def activate_from_env(environ: Mapping[str, str], kind: str = DRIVER) -> ProfiledProcess | None:
    """Activate as what this process is (see nrlprof.process.kind).

    A matched worker activates once Ray has connected it (its setup hook, or an import after that): its
    backends write under the session directory of its node.
    """
    if kind == WORKER or environ.get(WORKER_VARIABLE):
        return activate_worker(environ) if in_worker_process() else None
    if kind == CONTROLLER:
        return activate_controller(environ)
    from nrlprof.config.env import load_plan

    if not driver_configured(environ):
        return None
    return activate_driver(load_plan(environ))


def _remove_hooks() -> None:
    LIFECYCLE.uninstall()
    if os.environ.get(PARENT_VARIABLE) == str(os.getpid()):
        del os.environ[PARENT_VARIABLE]


def deactivate() -> None:
    """Close open windows (their files are kept) and remove every patch."""
    session, state.session = state.session, None
    try:
        if session is not None:
            session.finish()
    finally:
        _remove_hooks()
        if session is not None:
            for end in (session.children, session.parent_link):
                if end is not None:
                    end.close()


def _prepare_output_dirs(plan: Plan, source: str) -> None:
    if plan.backend("torch") is not None:
        _check_writable(Path(plan.torch.directory), source)
    memory = plan.backend("memory")
    if memory is not None and memory.output_dir:
        _check_writable(Path(memory.output_dir), "NRL_MEMORY_PROFILE_DIR")
    if plan.on_demand is not None:
        _check_writable(Path(plan.torch.directory), source)
        _check_writable(Path(plan.on_demand.memory_dir), "NRL_MEMORY_PROFILE_DIR")


def _check_writable(directory: Path, source: str) -> None:
    """The directory, or the nearest one above it that exists, is writable; nothing is created here."""
    existing = directory
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    problem = None
    if not existing.is_dir():
        problem = f"{existing} is not a directory"
    elif not os.access(existing, os.W_OK | os.X_OK):
        problem = f"{existing} is not writable by this user"
    if problem is not None:
        raise ConfigError(source, str(directory), "a directory this user can write", problem)


def _warn_if_cluster_already_running(session: Controller) -> None:
    ray = sys.modules.get("ray")
    if session.plan.active and ray is not None and ray.is_initialized():
        logger.warning(
            "Ray was initialised before nrlprof activated: its runtime-env agent runs without nrlprof's plugin fix "
            "unless `nrlprof patch-ray` was run; import nrlprof before ray.init()"
        )


def _log_plan(plan: Plan) -> None:
    for backend in plan.backends:
        patterns = ",".join(t.pattern for t in backend.targets)
        steps = "whole lifetime" if backend.steps is None else ",".join(w.label for w in backend.steps.windows)
        if backend.kind == "nsys" and plan.on_demand is not None and plan.on_demand.nsys and not backend.slow:
            steps = "on demand (launched under nsys; windows when asked for with `nrlprof capture`)"
        if backend.slow and plan.slow is not None:
            what = ("every step recorded, the slow steps' traces kept" if backend.slow == "keep" else
                    f"a window of {plan.slow.steps} step(s) at the step after a slow one")  # fmt: skip
            steps = (f"slow{':keep' if backend.slow == 'keep' else ''} ({what}; slow: {plan.slow.factor:g}x the median "
                     f"of the steps before it, or a rank {plan.slow.factor:g}x its peers; at most "
                     f"{plan.slow.max_triggers} a run)")  # fmt: skip
        logger.info("%s profiling planned for workers matching '%s', steps %s", backend.kind, patterns, steps)
    if plan.step_method is not None:
        logger.info("steps: the step marker NRL_STEP_METHOD=%s", plan.step_method.text)
    if plan.on_demand is not None:
        logger.info("armed for windows asked for while it runs (NRL_PROFILE_ON_DEMAND): `nrlprof capture`")
    logger.info("controller (driver) runs on %s pid %d", socket.gethostname(), os.getpid())
