"""One Session per process: a driver or controller (gate, hooks, controller backends) or a matched worker.

Activation builds the Session and makes it current; what needs Ray waits for `import ray` (so activation at
interpreter start-up imports nothing heavy). `deactivate()` closes its windows, removes every patch and
clears it. Activating again in a process that has a Session reconfigures that same Session: its open
windows close (their files are kept) and it then behaves exactly like a first activation.
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
from nrlprof.config.variables import JOB_PLAN_VARIABLE, PARENT_VARIABLE, anatomy_requested
from nrlprof.errors import ConfigError
from nrlprof.log import configure_logging, logger
from nrlprof.runtime import import_hooks, patches, state
from nrlprof.runtime.adoption import Adoption
from nrlprof.runtime.dispatch import WorkerChannel
from nrlprof.runtime.gate import Gate
from nrlprof.runtime.process import ProcessProfiler
from nrlprof.runtime.process_kind import CHILD, CONTROLLER, DRIVER, WORKER
from nrlprof.runtime.state import OpenWindows
from nrlprof.runtime.step_sources import StepSources
from nrlprof.workers.identity import RankCounter, WorkerIdentity
from nrlprof.workers.runtime_env import PLAN_VARIABLE, WORKER_VARIABLE, parse_worker_descriptor, worker_parent
from nrlprof.workers.tracker import Tracker

if TYPE_CHECKING:
    from nrlprof.anatomy.recorder import Recorder
    from nrlprof.runtime.child import ParentLink
    from nrlprof.runtime.child_channel import ChildChannel
    from nrlprof.runtime.engine_switches import EngineSwitches


class Session:
    """What nrlprof holds in one process: plan, identity, tracked children, open windows, backends, gate.

    `kind` is `driver`, `controller` (a Ray worker that is no matched worker: it becomes the controller
    when it steps, as verl's TaskRunner does), `worker` (a matched worker) or `child` (a process a matched
    worker started, which joins that worker's windows: `identity` is the worker's; nrlprof.runtime.child).
    """

    def __init__(
        self,
        plan: Plan,
        identity: WorkerIdentity | None,
        targets: Mapping[str, Target | None],
        tracker: Tracker | None = None,
        ranks: RankCounter | None = None,
        kind: str | None = None,
    ) -> None:
        self.kind = kind or (DRIVER if identity is None else WORKER)
        self.identity = identity
        self.tracker = tracker or Tracker()
        self.ranks = ranks or RankCounter()
        self.anatomy: Recorder | None = None
        # Class names of actors to launch as the controller (verl's TaskRunner under controller_nsight_options).
        self.controller_classes: set[str] = set()
        self.known_actors: dict[str, WorkerIdentity] = {}
        self.adoption = Adoption(self)
        # Weak references to the unmatched actors a driver created: one may become a controller.
        self.created_actors: list = []
        # A worker created by a profiled worker: its parent gates it (no controller adopts it).
        self.gated_by_parent = False
        # A matched worker's channel to the processes it starts; a child's end of its worker's channel.
        self.children: ChildChannel | None = None
        self.parent_link: ParentLink | None = None
        self.engines: EngineSwitches | None = None
        self._configure(plan, targets)

    def _configure(self, plan: Plan, targets: Mapping[str, Target | None]) -> None:
        self.plan = plan
        self.targets = dict(targets)
        self.windows = OpenWindows()
        self._process: ProcessProfiler | None = None
        self._gate: Gate | None = None
        self._channel: WorkerChannel | None = None
        self.sources = StepSources(self._drive, plan.step_method is not None)
        # `nrlprof.step`: through the step sources until it is called once, then the gate's own step.
        self.step = _ignore_step if self.follows_windows else self._first_explicit_step

    @property
    def follows_windows(self) -> bool:
        """A matched worker or its child: windows come from the controller, never from its own steps."""
        return self.kind in (WORKER, CHILD)

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
    def has_process(self) -> bool:
        return self._process is not None

    def use_process(self, process: ProcessProfiler) -> None:
        """A child's backends, built with its worker's Ray session (it has none of its own)."""
        self._process = process

    @property
    def channel(self) -> WorkerChannel:
        """The tracked actors this process created, reached with window actions."""
        if self._channel is None:
            self._channel = WorkerChannel(self.tracker, self.plan.timeout_s)
        return self._channel

    @property
    def gate(self) -> Gate:
        if self._gate is None:
            self._gate = Gate(self.plan, self.tracker, self.process, self.channel, self.adoption.take_answers)
            if self.anatomy is not None:
                self._gate.marks = self.anatomy.marks
        return self._gate

    def _first_explicit_step(self, step: int) -> None:
        self.sources.explicit(step)
        self.step = self.gate.step

    def framework_step(self, step: int, source: str) -> None:
        """A step found by a framework adapter (verl's trainer, NeMo RL's loop, ...)."""
        if not self.follows_windows:
            self.sources.from_framework(step, source)

    def marker_step(self, step: int, source: str) -> None:
        if not self.follows_windows:
            self.sources.from_marker(step, source)

    @property
    def stepped(self) -> bool:
        return self._gate is not None

    def _drive(self, step: int) -> None:
        if self._gate is None:
            # Built at the first step, after `ray.init()`: the controller's files go under Ray's session.
            self._became_controller(step)
        self.gate.step(step)

    def _became_controller(self, step: int) -> None:
        if self.anatomy is not None and not self.anatomy.started:
            self.anatomy.start()
        if self.kind == CONTROLLER:
            logger.info(
                "step %d: this actor (%s) is the controller on %s pid %d: it opens and closes the windows of "
                "the %d worker(s) it created",
                step,
                _actor_description(),
                socket.gethostname(),
                os.getpid(),
                len(self.tracker),
            )

    def finish(self) -> None:
        if self._gate is not None:
            self._gate.finish()
        elif self._process is not None:
            self._process.close_all()
        if self.anatomy is not None:
            self.anatomy.finish()

    def reconfigure(self, plan: Plan, targets: Mapping[str, Target | None]) -> None:
        """Close this session's windows (files kept) and take the new plan; tracked actors stay tracked."""
        self.finish()
        self.anatomy = None
        self._configure(plan, targets)


def _ignore_step(step: int) -> None:
    """Workers follow the controller's steps; their own `nrlprof.step` calls change nothing."""


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


def _actor_description() -> str:
    try:
        import ray

        context = ray.get_runtime_context()
        actor = context.get_actor_name() or context.get_actor_id()
        return f"{actor}"
    except Exception:
        return "?"


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


def _controller_targets(plan: Plan) -> dict[str, Target | None]:
    return {b.kind: None for b in plan.backends if b.controller and b.steps is not None}


def activate_driver(plan: Plan, plan_source: str = "NRL_TORCH_PROFILE_DIR", kind: str = DRIVER) -> Session | None:
    """Validate, then activate a driver (or an actor that may be the controller).

    The agent hook goes into the environment now (a cluster this process starts inherits it); the Ray hooks
    are installed when `ray` is imported. A process that already has a Session reconfigures it.
    """
    configure_logging(plan.log_level)
    anatomy = anatomy_settings(os.environ, plan.active)
    if not (plan.active or anatomy.enabled or plan.step_method or plan.framework_config):
        return state.session
    plan = _resolved(plan)
    _prepare_output_dirs(plan, plan_source)
    session = state.session
    _remove_hooks()
    if session is not None and session.kind != WORKER:
        session.reconfigure(plan, _controller_targets(plan))
    else:
        session = Session(plan, None, _controller_targets(plan), kind=kind)
    if plan.active and session.kind == DRIVER:
        from nrlprof.rayfix.plugins_env import install_agent_hook

        install_agent_hook(os.environ)
    if anatomy.enabled:
        from nrlprof.anatomy.recorder import Recorder

        session.anatomy = Recorder(anatomy)
    state.session = session
    from nrlprof import adapters

    adapters.install(session)
    import_hooks.when_imported("ray", "nrlprof's Ray hooks", lambda _ray: _on_ray_imported(session))
    return session


def _on_ray_imported(session: Session) -> None:
    """What needs Ray: the actor-creation hook, the step marker, the job's environment; the log lines."""
    if state.session is not session:
        return
    from nrlprof.runtime import call_hook, creation_hook

    creation_hook.install(session)
    call_hook.install(session)
    if session.kind != DRIVER:
        mark_children()
    if session.kind == DRIVER:
        from nrlprof.runtime import job_env

        job_env.install(session)
        if session.anatomy is not None and not session.anatomy.started:
            session.anatomy.start()
        _warn_if_cluster_already_running(session)
        _log_plan(session.plan)


def mark_children() -> None:
    """Processes this Ray worker starts (a DataLoader's, an inference engine's) are no drivers of their own.

    A driver's own children are left alone: a launcher or a sweep script starts drivers that way.
    """
    os.environ[PARENT_VARIABLE] = str(os.getpid())


def activate_controller(environ: Mapping[str, str]) -> Session | None:
    """In a Ray worker that no pattern matched: the plan the driver forwarded, or the variables it inherited.

    Nothing is logged until it steps; a bad setting is logged, never raised (the driver validated it).
    """
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


def activate_worker(environ: Mapping[str, str] = os.environ) -> Session | None:
    """In a matched worker (run by its setup hook): its backends, and the hook for the actors it creates.

    Activated at interpreter start-up, before the worker has joined Ray, it builds its backends when its setup
    hook runs (Ray's session directory is known then: the manifests and the children's channel need it).
    """
    if state.session is not None:
        if state.session.kind == WORKER and not _before_ray_connects():
            _when_connected(state.session)
        return state.session
    plan_text, worker_text = environ.get(PLAN_VARIABLE), environ.get(WORKER_VARIABLE)
    if not plan_text or not worker_text:
        return None
    plan = Plan.from_json(plan_text)
    identity, targets = parse_worker_descriptor(worker_text)
    configure_logging(plan.log_level)
    from nrlprof import adapters
    from nrlprof.ranges import method_ranges
    from nrlprof.runtime import creation_hook

    session = Session(plan, identity, targets)
    session.gated_by_parent = worker_parent(worker_text) is not None
    creation_hook.install(session)
    method_ranges.install(identity.name)
    state.session = session
    adapters.install(session)
    mark_children()
    if not _before_ray_connects():
        _when_connected(session)
    return session


def _before_ray_connects() -> bool:
    """A Ray worker process at interpreter start-up: its setup hook runs once it has joined the cluster."""
    from nrlprof.runtime.process_kind import is_ray_worker

    ray = sys.modules.get("ray")
    return is_ray_worker(sys.argv) and (ray is None or not ray.is_initialized())


def _when_connected(session: Session) -> None:
    if session.engines is None:
        _open_children(session)
        _arm_oom_snapshot(session)


def _open_children(session: Session) -> None:
    """The processes this worker starts join its windows; engines' own profiler switches are driven with them."""
    from nrlprof.runtime.engine_switches import EngineSwitches

    process = session.process
    session.engines = EngineSwitches(process.role, process.write_manifest)
    if not any(b.steps is not None for kind in session.targets if (b := session.plan.backend(kind)) is not None):
        return
    try:
        from nrlprof.runtime.child_channel import open_children

        open_children(session)
    except Exception as err:  # the worker itself is profiled all the same
        logger.warning("the processes this worker starts will not join its windows: %s", err)


def _arm_oom_snapshot(session: Session) -> None:
    """With NRL_MEMORY_PROFILE_ON_OOM=1, a selected worker keeps allocator history from its CUDA start."""
    backend = session.process.backends.get("memory")
    if backend is not None and backend.on_oom:
        from nrlprof.backends.memory import arm_oom_snapshot

        arm_oom_snapshot(backend)


def activate_from_env(environ: Mapping[str, str], kind: str = DRIVER) -> Session | None:
    """Activate as what this process is (see nrlprof.runtime.process_kind)."""
    if kind == WORKER or (environ.get(WORKER_VARIABLE) and in_ray_worker_process()):
        return activate_worker(environ)
    if kind == CONTROLLER:
        return activate_controller(environ)
    from nrlprof.config.env import is_configured, load_plan
    from nrlprof.config.variables import steps_or_framework_requested

    if not (is_configured(environ) or anatomy_requested(environ) or steps_or_framework_requested(environ)):
        return None
    return activate_driver(load_plan(environ))


def _remove_hooks() -> None:
    patches.uninstall_all()
    import_hooks.remove_all()
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


def _warn_if_cluster_already_running(session: Session) -> None:
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
        logger.info("%s profiling planned for workers matching '%s', steps %s", backend.kind, patterns, steps)
    if plan.step_method is not None:
        logger.info("steps: the step marker NRL_STEP_METHOD=%s", plan.step_method.text)
    logger.info("controller (driver) runs on %s pid %d", socket.gethostname(), os.getpid())
