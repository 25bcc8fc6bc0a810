"""The actor-creation hook: matched actors get their runtime_env fragment and are tracked."""

from __future__ import annotations

from typing import Any

from nrlprof.config.plan import NSYS, Plan
from nrlprof.log import logger
from nrlprof.runtime import patches
from nrlprof.workers.identity import RankCounter, WorkerIdentity, rank_from_env_vars
from nrlprof.workers.matching import Match, match_worker
from nrlprof.workers.runtime_env import fragment_for, isolation_from_parent, merge_runtime_env
from nrlprof.workers.tracker import TrackedActor, Tracker

PATCH_NAME = "ray.actor.ActorClass._remote"


def class_name_of(actor_class: Any) -> str:
    meta = actor_class.__ray_metadata__
    modified = getattr(meta, "modified_class", None)
    if modified is not None:
        return modified.__name__
    return str(meta.class_name).rsplit(".", 1)[-1]


def log_matches(identity: WorkerIdentity, matches: tuple[Match, ...]) -> None:
    for match in matches:
        tool = "Nsight" if match.backend.kind == NSYS else match.backend.kind.capitalize()
        if match.backend.kind == "rocprof":
            tool = "rocprof-sys"
        logger.info(
            "%s profiling enabled for worker '%s' (matched pattern '%s')", tool, identity.name, match.target.pattern
        )


def job_setup_hook() -> str | None:
    """The setup hook this job (or this worker's own runtime env) already runs, if any."""
    import os

    from nrlprof.workers.runtime_env import RAY_SETUP_HOOK_VARIABLE, SETUP_HOOK, USER_SETUP_HOOK_VARIABLE

    current = os.environ.get(RAY_SETUP_HOOK_VARIABLE)
    if current == SETUP_HOOK:
        return os.environ.get(USER_SETUP_HOOK_VARIABLE)
    if current:
        return current
    try:
        import ray

        env_vars = ray.get_runtime_context().runtime_env.get("env_vars") or {}
    except Exception:
        return None
    return env_vars.get(RAY_SETUP_HOOK_VARIABLE)


def parse_runtime_env(runtime_env: dict):
    """Ray's own parsing of a runtime_env dict, as `.options(runtime_env=...)` does it."""
    from ray._private.utils import parse_runtime_env_for_task_or_actor

    return parse_runtime_env_for_task_or_actor(runtime_env)


class ActorCreationHook:
    def __init__(self, plan: Plan, tracker: Tracker, ranks: RankCounter, inside_profiled_worker: bool) -> None:
        self.plan = plan
        self.tracker = tracker
        self.ranks = ranks
        self.inside_profiled_worker = inside_profiled_worker

    def identity_for(self, actor_class: Any, actor_options: dict) -> WorkerIdentity:
        class_name = class_name_of(actor_class)
        runtime_env = actor_options.get("runtime_env") or {}
        probe = WorkerIdentity(class_name, actor_options.get("name"), 0)
        rank = rank_from_env_vars(runtime_env.get("env_vars"))
        if rank is None:
            rank = self.ranks.take(probe.name)
        return WorkerIdentity(class_name, actor_options.get("name"), rank)

    def wrap(self, original_remote):
        hook = self

        def _remote(actor_class, args=None, kwargs=None, **actor_options):
            identity = hook.identity_for(actor_class, actor_options)
            matches = match_worker(hook.plan, identity)
            if matches:
                log_matches(identity, matches)
            fragment = fragment_for(hook.plan, identity, matches)
            if hook.inside_profiled_worker:
                fragment = {**isolation_from_parent(matches, job_setup_hook()), **fragment}
            if not fragment:
                return original_remote(actor_class, args, kwargs, **actor_options)
            merged = merge_runtime_env(actor_options.get("runtime_env"), fragment, job_setup_hook())
            actor_options["runtime_env"] = parse_runtime_env(merged)
            handle = original_remote(actor_class, args, kwargs, **actor_options)
            if any(m.backend.steps is not None for m in matches):
                hook.tracker.add(TrackedActor(handle, identity, tuple(m.backend.kind for m in matches)))
            return handle

        _remote.__wrapped__ = original_remote
        return _remote


def install(plan: Plan, tracker: Tracker, ranks: RankCounter, inside_profiled_worker: bool) -> ActorCreationHook:
    from ray.actor import ActorClass

    hook = ActorCreationHook(plan, tracker, ranks, inside_profiled_worker)
    patches.install(PATCH_NAME, ActorClass, "_remote", hook.wrap)
    return hook


def uninstall() -> None:
    patches.uninstall(PATCH_NAME)
