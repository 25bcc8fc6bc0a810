"""The actor-creation hook: matched actors get their runtime_env fragment and are tracked for windows.

In the driver, an actor is profiled when it matches a pattern.  Inside a profiled worker, an actor it
creates (an inference engine's tensor-parallel workers) is profiled with its parent, under the parent's
backends and name (`<parent>.<child>`), ranked by creation order within the parent, unless it matches
a pattern itself.  An actor whose runtime_env sets `NRL_PROFILE_DISABLE=1` is never profiled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nrlprof.config.plan import NSYS, ROCPROF
from nrlprof.log import logger
from nrlprof.rayfix.cluster_fix import isolation_overrides, needs_prefix, prefixed_runtime_env
from nrlprof.runtime import patches
from nrlprof.workers.identity import WorkerIdentity, rank_from_env_vars, snake_case
from nrlprof.workers.matching import Match, match_worker
from nrlprof.workers.runtime_env import fragment_for, isolation_from_parent, merge_runtime_env, package_fragment
from nrlprof.workers.tracker import TrackedActor

if TYPE_CHECKING:
    from nrlprof.runtime.session import Session

PATCH_NAME = "ray.actor.ActorClass._remote"
OPT_OUT_VARIABLE = "NRL_PROFILE_DISABLE"
TOOL_NAMES = {NSYS: "Nsight", ROCPROF: "rocprof-sys"}


def class_name_of(actor_class: Any) -> str:
    meta = actor_class.__ray_metadata__
    modified = getattr(meta, "modified_class", None)
    if modified is not None:
        return modified.__name__
    return str(meta.class_name).rsplit(".", 1)[-1]


def log_matches(identity: WorkerIdentity, matches: tuple[Match, ...], parent: str | None = None) -> None:
    for match in matches:
        tool = TOOL_NAMES.get(match.backend.kind, match.backend.kind.capitalize())
        if parent is None:
            logger.info(
                "%s profiling enabled for worker '%s' (matched pattern '%s')", tool, identity.name, match.target.pattern
            )
        else:
            logger.info(
                "%s profiling enabled for worker '%s' (created by '%s', which matched pattern '%s')",
                tool,
                identity.name,
                parent,
                match.target.pattern,
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


def _opted_out(runtime_env: object) -> bool:
    env_vars = runtime_env.get("env_vars") if isinstance(runtime_env, dict) else None
    return isinstance(env_vars, dict) and str(env_vars.get(OPT_OUT_VARIABLE, "")).strip() == "1"


class ActorCreationHook:
    def __init__(self, session: Session) -> None:
        self.session = session
        self._package: dict | None = None

    def package(self) -> dict:
        """nrlprof's `py_modules` entry, uploaded once; empty (workers need nrlprof installed) if that fails."""
        if self._package is None:
            try:
                self._package = package_fragment()
            except Exception as err:
                logger.warning("could not ship nrlprof to the workers (they need it installed): %s", err)
                self._package = {}
        return self._package

    def identify(self, actor_class: Any, actor_options: dict) -> tuple[WorkerIdentity, tuple[Match, ...], str | None]:
        """Who the new actor is, which backends profile it, and the parent it inherits them from (if any)."""
        session = self.session
        class_name = class_name_of(actor_class)
        actor_name = actor_options.get("name")
        runtime_env = actor_options.get("runtime_env") or {}
        own = WorkerIdentity(class_name, actor_name, 0)
        rank = rank_from_env_vars(runtime_env.get("env_vars"))
        identity = WorkerIdentity(class_name, actor_name, session.ranks.take(own.name) if rank is None else rank)
        matches = match_worker(session.plan, identity)
        parent = session.identity
        if matches or parent is None:
            return identity, matches, None
        child_name = f"{parent.name}.{snake_case(class_name)}"
        child = WorkerIdentity(class_name, actor_name, session.ranks.take(f"child:{child_name}"), child_name)
        inherited = tuple(
            Match(backend, target, parent.name)
            for kind, target in session.targets.items()
            if target is not None and (backend := session.plan.backend(kind)) is not None
        )
        return child, inherited, parent.name

    def wrap(self, original_remote):
        hook = self

        def _remote(actor_class, args=None, kwargs=None, **actor_options):
            try:
                prepared = hook.prepare(actor_class, actor_options)
            except Exception as err:  # profiling must never make actor creation raise
                logger.warning(
                    "actor %s runs unprofiled: its runtime_env could not take nrlprof's settings (%s)",
                    class_name_of(actor_class),
                    err,
                )
                prepared = None
            if prepared is None:
                return original_remote(actor_class, args, kwargs, **actor_options)
            options, identity, matches = prepared
            if options is None:
                return hook.created(original_remote(actor_class, args, kwargs, **actor_options), identity)
            try:
                handle = original_remote(actor_class, args, kwargs, **options)
            except (ValueError, TypeError) as err:
                # Ray refuses the combined runtime_env (e.g. `image_uri` beside other fields): create as asked.
                logger.warning(
                    "actor %s runs unprofiled: Ray refused its profiling runtime_env: %s", identity.name, err
                )
                return hook.created(original_remote(actor_class, args, kwargs, **actor_options), identity)
            if any(m.backend.steps is not None for m in matches):
                hook.session.tracker.add(TrackedActor(handle, identity, tuple(m.backend.kind for m in matches)))
            return hook.created(handle, identity)

        _remote.__wrapped__ = original_remote
        return _remote

    def created(self, handle: Any, identity: WorkerIdentity) -> Any:
        """Every actor the driver creates, matched or not, named for the step anatomy."""
        anatomy = self.session.anatomy
        if anatomy is not None:
            anatomy.actor_created(handle, identity.name, identity.rank, identity.class_name)
        return handle

    def prepare(self, actor_class: Any, actor_options: dict) -> tuple[dict | None, WorkerIdentity, tuple[Match, ...]]:
        """The actor's options with its runtime_env fragment merged in (None when nothing changes), and who it is."""
        in_worker = self.session.identity is not None
        if _opted_out(actor_options.get("runtime_env")):
            identity, matches, fragment = WorkerIdentity(class_name_of(actor_class), None, 0), (), {}
        else:
            identity, matches, parent = self.identify(actor_class, actor_options)
            if matches:
                log_matches(identity, matches, parent)
            fragment = fragment_for(self.session.plan, identity, matches)
            if matches and not in_worker:
                fragment.update(self.package())
        if in_worker:
            fragment = {**isolation_from_parent(matches, job_setup_hook()), **isolation_overrides(), **fragment}
        if not fragment:
            return None, identity, matches
        merged = merge_runtime_env(actor_options.get("runtime_env"), fragment, job_setup_hook())
        if matches and needs_prefix(None if in_worker else self.package()):
            # Some node's runtime-env agent would run Ray's unfixed plugin: nsys goes in front of the interpreter.
            merged = dict(prefixed_runtime_env(merged))
        return {**actor_options, "runtime_env": parse_runtime_env(merged)}, identity, matches


def install(session: Session) -> ActorCreationHook:
    from ray.actor import ActorClass

    hook = ActorCreationHook(session)
    patches.install(PATCH_NAME, ActorClass, "_remote", hook.wrap)
    return hook
