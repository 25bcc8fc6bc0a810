"""Process-wide activation: the driver (gate + hooks) or a matched worker (backends + hooks)."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from nrlprof.backends.base import ProcessRole
from nrlprof.config.env import is_configured, load_plan
from nrlprof.config.plan import Plan, Target
from nrlprof.log import configure_logging, logger
from nrlprof.runtime.process import ProcessProfiler
from nrlprof.workers.identity import RankCounter, WorkerIdentity
from nrlprof.workers.runtime_env import PLAN_VARIABLE, WORKER_VARIABLE, parse_worker_descriptor
from nrlprof.workers.tracker import Tracker


@dataclass
class ActiveState:
    plan: Plan
    tracker: Tracker
    ranks: RankCounter
    identity: WorkerIdentity | None
    targets: dict[str, Target | None]
    hook: object = None
    _process: ProcessProfiler | None = None
    _gate: object = None

    @property
    def process(self) -> ProcessProfiler:
        """Built on first use, once Ray knows the session directory."""
        if self._process is None:
            session_dir, node_ip = _ray_session()
            role = ProcessRole(self.identity, self.plan, session_dir, node_ip)
            self._process = ProcessProfiler(role, self.targets)
        return self._process

    @property
    def gate(self):
        if self._gate is None:
            from nrlprof.runtime.dispatch import dispatch
            from nrlprof.runtime.gate import Gate

            self._gate = Gate(self.plan, self.tracker, self.process, dispatch)
        return self._gate


_state: ActiveState | None = None


def _ray_session() -> tuple[str | None, str]:
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return None, ""
    try:
        node = ray._private.worker.global_worker.node
        return node.get_session_dir_path(), node.node_ip_address
    except Exception:
        return None, ""


def _in_ray_worker_process() -> bool:
    ray = sys.modules.get("ray")
    if ray is None:
        return False
    worker = ray._private.worker.global_worker
    return getattr(worker, "mode", None) == ray._private.worker.WORKER_MODE


def state() -> ActiveState | None:
    return _state


def worker_state() -> ActiveState | None:
    if _state is None and os.environ.get(WORKER_VARIABLE):
        activate_worker()
    return _state


def _resolved(plan: Plan) -> Plan:
    """Relative output directories resolved against the driver's working directory."""
    torch_settings = replace(plan.torch, directory=str(Path(plan.torch.directory).expanduser().resolve()))
    backends = tuple(
        replace(b, output_dir=str(Path(b.output_dir).expanduser().resolve())) if b.output_dir else b
        for b in plan.backends
    )
    return replace(plan, torch=torch_settings, backends=backends)


def _install_ray_side(plan: Plan, tracker: Tracker, ranks: RankCounter, inside_profiled_worker: bool = False):
    from nrlprof.workers import creation_hook as ray_hooks
    return ray_hooks.install(plan, tracker, ranks, inside_profiled_worker)


def activate_driver(plan: Plan) -> ActiveState | None:
    """Validate-then-activate in the driver: agent hook, creation hook, controller backends."""
    global _state
    configure_logging(plan.log_level)
    if not plan.active:
        return _state
    plan = _resolved(plan)
    _prepare_output_dirs(plan)
    from nrlprof.rayfix.plugins_env import install_agent_hook

    install_agent_hook(os.environ)
    if _state is not None:
        _state.plan = plan
        _state.hook.plan = plan
        _state._gate = None
        _state._process = None
        return _state
    tracker, ranks = Tracker(), RankCounter()
    hook = _install_ray_side(plan, tracker, ranks)
    targets: dict[str, Target | None] = {b.kind: None for b in plan.backends if b.controller and b.steps is not None}
    _state = ActiveState(plan, tracker, ranks, None, targets, hook)
    _warn_if_cluster_already_running()
    _log_plan(plan)
    return _state


def activate_worker() -> ActiveState | None:
    """In a matched worker: its backends, and the hook that matches the actors it creates."""
    global _state
    if _state is not None:
        return _state
    plan_text, worker_text = os.environ.get(PLAN_VARIABLE), os.environ.get(WORKER_VARIABLE)
    if not plan_text or not worker_text:
        return None
    plan = Plan.from_json(plan_text)
    identity, targets = parse_worker_descriptor(worker_text)
    configure_logging(plan.log_level)
    tracker, ranks = Tracker(), RankCounter()
    hook = _install_ray_side(plan, tracker, ranks, inside_profiled_worker=True)
    _state = ActiveState(plan, tracker, ranks, identity, targets, hook)
    from nrlprof.ranges import method_ranges
    method_ranges.install(identity.name)
    return _state


def activate_from_env(environ: Mapping[str, str]) -> ActiveState | None:
    if environ.get(WORKER_VARIABLE):
        return activate_worker()
    if not is_configured(environ) or _in_ray_worker_process():
        return None
    return activate_driver(load_plan(environ))


def deactivate() -> None:
    """Close windows and remove every patch (tests, and `nrlprof.disable()`)."""
    global _state
    from nrlprof.runtime import patches
    if _state is not None and _state._gate is not None:
        _state._gate.finish()
    patches.uninstall_all()
    _state = None


def _prepare_output_dirs(plan: Plan) -> None:
    from nrlprof.errors import ConfigError

    if plan.backend("torch") is None:
        return
    directory = Path(plan.torch.directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / f".nrlprof-write-test-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as err:
        raise ConfigError(
            "NRL_TORCH_PROFILE_DIR", str(directory), "a directory this user can write", str(err)
        ) from None


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
