"""One Session per process: the driver (gate, hooks, controller backends) or a matched worker (its backends).

Activation builds a Session and makes it current; `deactivate()` closes its windows, removes every patch
and clears it. A second activation first deactivates the first, so it behaves exactly like a first one.
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
from nrlprof.backends.base import ProcessRole
from nrlprof.config.plan import Plan, Target
from nrlprof.config.variables import anatomy_requested
from nrlprof.errors import ConfigError
from nrlprof.log import configure_logging, logger
from nrlprof.runtime import patches, state
from nrlprof.runtime.dispatch import WorkerChannel
from nrlprof.runtime.gate import Gate
from nrlprof.runtime.process import ProcessProfiler
from nrlprof.runtime.state import OpenWindows
from nrlprof.workers.identity import RankCounter, WorkerIdentity
from nrlprof.workers.runtime_env import PLAN_VARIABLE, WORKER_VARIABLE, parse_worker_descriptor
from nrlprof.workers.tracker import Tracker

if TYPE_CHECKING:
    from nrlprof.anatomy.recorder import Recorder


class Session:
    """What nrlprof holds in one process: plan, identity, tracked children, open windows, backends, gate."""

    def __init__(
        self,
        plan: Plan,
        identity: WorkerIdentity | None,
        targets: Mapping[str, Target | None],
        tracker: Tracker | None = None,
        ranks: RankCounter | None = None,
    ) -> None:
        self.plan = plan
        self.identity = identity
        self.targets = dict(targets)
        self.tracker = tracker or Tracker()
        self.ranks = ranks or RankCounter()
        self.windows = OpenWindows()
        self._process: ProcessProfiler | None = None
        self._gate: Gate | None = None
        self._channel: WorkerChannel | None = None
        self.anatomy: Recorder | None = None
        # `nrlprof.step` calls this: the gate's own step once built; nothing in workers.
        self.step = self._first_step if identity is None else _ignore_step

    @property
    def is_driver(self) -> bool:
        return self.identity is None

    @property
    def process(self) -> ProcessProfiler:
        """This process's backends; built on first use, once Ray knows the session directory."""
        if self._process is None:
            session_dir, node_ip = _ray_session()
            role = ProcessRole(self.identity, self.plan, session_dir, node_ip)
            self._process = ProcessProfiler(role, self.targets, self.windows)
        return self._process

    @property
    def channel(self) -> WorkerChannel:
        """The tracked actors this process created, reached with window actions."""
        if self._channel is None:
            self._channel = WorkerChannel(self.tracker, self.plan.timeout_s)
        return self._channel

    @property
    def gate(self) -> Gate:
        if self._gate is None:
            self._gate = Gate(self.plan, self.tracker, self.process, self.channel)
            if self.anatomy is not None:
                self._gate.marks = self.anatomy.marks
        return self._gate

    def _first_step(self, step: int) -> None:
        # Built at the first step, after `ray.init()`: the controller's files go under Ray's session.
        self.step = self.gate.step
        self.step(step)

    def finish(self) -> None:
        if self._gate is not None:
            self._gate.finish()
        elif self._process is not None:
            self._process.close_all()
        if self.anatomy is not None:
            self.anatomy.finish()


def _ignore_step(step: int) -> None:
    """Workers follow the driver's steps; their own `nrlprof.step` calls change nothing."""


def current() -> Session | None:
    return state.session


def _ray_session() -> tuple[str | None, str]:
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return None, ""
    try:
        node = ray._private.worker.global_worker.node
        return node.get_session_dir_path(), node.node_ip_address
    except Exception:
        return None, ""


def in_ray_worker_process() -> bool:
    ray = sys.modules.get("ray")
    if ray is None:
        return False
    worker = ray._private.worker.global_worker
    return getattr(worker, "mode", None) == ray._private.worker.WORKER_MODE


def _resolved(plan: Plan) -> Plan:
    """Relative output directories resolved against the driver's working directory."""
    torch_settings = replace(plan.torch, directory=str(Path(plan.torch.directory).expanduser().resolve()))
    backends = tuple(
        replace(b, output_dir=str(Path(b.output_dir).expanduser().resolve())) if b.output_dir else b
        for b in plan.backends
    )
    return replace(plan, torch=torch_settings, backends=backends)


def activate_driver(plan: Plan, plan_source: str = "NRL_TORCH_PROFILE_DIR") -> Session | None:
    """Validate, then activate in the driver: agent hook, creation hook, controller backends.

    A running session is deactivated first (its open windows closed, their files kept); the actors it
    already created stay tracked, so windows still reach them.
    """
    configure_logging(plan.log_level)
    anatomy = anatomy_settings(os.environ, plan.active)
    if not plan.active and not anatomy.enabled:
        return state.session
    plan = _resolved(plan)
    _prepare_output_dirs(plan, plan_source)
    previous = state.session
    tracker, ranks = (previous.tracker, previous.ranks) if previous is not None else (None, None)
    deactivate()
    from nrlprof.rayfix.plugins_env import install_agent_hook
    from nrlprof.workers import creation_hook

    if plan.active:
        install_agent_hook(os.environ)
    targets: dict[str, Target | None] = {b.kind: None for b in plan.backends if b.controller and b.steps is not None}
    session = Session(plan, None, targets, tracker, ranks)
    creation_hook.install(session)
    if anatomy.enabled:
        from nrlprof.anatomy.recorder import Recorder

        session.anatomy = Recorder(anatomy).start()
    state.session = session
    _warn_if_cluster_already_running()
    _log_plan(plan)
    return session


def activate_worker(environ: Mapping[str, str] = os.environ) -> Session | None:
    """In a matched worker (run by its setup hook): its backends, and the hook for the actors it creates."""
    if state.session is not None:
        return state.session
    plan_text, worker_text = environ.get(PLAN_VARIABLE), environ.get(WORKER_VARIABLE)
    if not plan_text or not worker_text:
        return None
    plan = Plan.from_json(plan_text)
    identity, targets = parse_worker_descriptor(worker_text)
    configure_logging(plan.log_level)
    from nrlprof.ranges import method_ranges
    from nrlprof.workers import creation_hook

    session = Session(plan, identity, targets)
    creation_hook.install(session)
    method_ranges.install(identity.name)
    state.session = session
    _arm_oom_snapshot(session)
    return session


def _arm_oom_snapshot(session: Session) -> None:
    """With NRL_MEMORY_PROFILE_ON_OOM=1, a selected worker keeps allocator history from its CUDA start."""
    backend = session.process.backends.get("memory")
    if backend is not None and backend.on_oom:
        from nrlprof.backends.memory import arm_oom_snapshot

        arm_oom_snapshot(backend)


def activate_from_env(environ: Mapping[str, str]) -> Session | None:
    if environ.get(WORKER_VARIABLE):
        return activate_worker(environ)
    from nrlprof.config.env import is_configured, load_plan

    if not (is_configured(environ) or anatomy_requested(environ)) or in_ray_worker_process():
        return None
    return activate_driver(load_plan(environ))


def deactivate() -> None:
    """Close open windows (their files are kept) and remove every patch."""
    session, state.session = state.session, None
    try:
        if session is not None:
            session.finish()
    finally:
        patches.uninstall_all()


def _prepare_output_dirs(plan: Plan, source: str) -> None:
    if plan.backend("torch") is not None:
        _check_writable(Path(plan.torch.directory), source)
    memory = plan.backend("memory")
    if memory is not None and memory.output_dir:
        _check_writable(Path(memory.output_dir), "NRL_MEMORY_PROFILE_DIR")


def _check_writable(directory: Path, source: str) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / f".nrlprof-write-test-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as err:
        raise ConfigError(source, str(directory), "a directory this user can write", str(err)) from None


def _warn_if_cluster_already_running() -> None:
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        logger.warning(
            "Ray was initialised before nrlprof activated: its runtime-env agent runs without nrlprof's plugin fix "
            "unless `nrlprof patch-ray` was run; import nrlprof before ray.init()"
        )


def _log_plan(plan: Plan) -> None:
    for backend in plan.backends:
        patterns = ",".join(t.pattern for t in backend.targets)
        steps = "whole lifetime" if backend.steps is None else ",".join(w.label for w in backend.steps.windows)
        logger.info("%s profiling planned for workers matching '%s', steps %s", backend.kind, patterns, steps)
    logger.info("controller (driver) runs on %s pid %d", socket.gethostname(), os.getpid())
