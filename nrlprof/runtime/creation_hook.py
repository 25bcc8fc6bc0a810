"""The actor-creation hook: a matched actor gets its runtime_env fragment and is tracked for windows; an actor a
profiled worker (or a process it started) creates is profiled with it as `<parent>.<child>` unless it matches itself;
`NRL_PROFILE_DISABLE=1` in an actor's runtime_env keeps it out. docs/design.md, "Matching at actor creation"."""

from __future__ import annotations

import os
from typing import Any

from nrlprof import rayapi
from nrlprof.config.plan import NSYS
from nrlprof.config.variables import DISABLE_VARIABLE
from nrlprof.launch.runtime_env import fragment_for, isolation_from_parent, merge_runtime_env, package_fragment
from nrlprof.log import logger
from nrlprof.process import patches
from nrlprof.process.kind import CHILD
from nrlprof.rayfix.cluster_fix import isolation_overrides, needs_prefix, prefixed_runtime_env
from nrlprof.runtime.controller import Controller
from nrlprof.runtime.profiled import ProfiledProcess
from nrlprof.workers.frameworks import framework_of_class
from nrlprof.workers.identity import WorkerIdentity, rank_from_env_vars, snake_case
from nrlprof.workers.matching import Match, log_matches, match_worker
from nrlprof.workers.tracker import TrackedActor

PATCH_NAME = "ray.actor.ActorClass._remote"
OPT_OUT_VARIABLE = DISABLE_VARIABLE
NSIGHT_KEYS = ("nsight", "_nsight")


def class_name_of(actor_class: Any) -> str:
    return rayapi.actor_class_name(actor_class)


def framework_of(actor_class: Any) -> str | None:
    """The framework whose class the actor is (nrlprof.workers.frameworks): it says what a pattern means."""
    return framework_of_class(rayapi.modified_class(actor_class))


def roles_of(actor_class: Any) -> tuple[str, ...]:
    """The roles a framework fused into one actor class (verl's WorkerDict), as its adapter recorded them."""
    return tuple(getattr(rayapi.modified_class(actor_class), "__nrlprof_roles__", ()))


def job_setup_hook() -> str | None:
    """The setup hook this job (or this worker's own runtime env) already runs, if any."""
    from nrlprof.launch.runtime_env import RAY_SETUP_HOOK_VARIABLE, SETUP_HOOK, USER_SETUP_HOOK_VARIABLE

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


def _opted_out(runtime_env: object) -> bool:
    env_vars = runtime_env.get("env_vars") if isinstance(runtime_env, dict) else None
    return isinstance(env_vars, dict) and str(env_vars.get(OPT_OUT_VARIABLE, "")).strip() == "1"


def _without_own_nsight(runtime_env: object, identity: WorkerIdentity) -> object:
    """The runtime_env without the nsight options nrlprof's own nsys takes the place of."""
    if not isinstance(runtime_env, dict) or not any(runtime_env.get(k) for k in NSIGHT_KEYS):
        return runtime_env
    logger.info(
        "worker '%s': its runtime_env's own nsight options stand down; nrlprof's nsys runs in it (one nsys per "
        "process)",
        identity.name,
    )
    return {k: v for k, v in runtime_env.items() if k not in NSIGHT_KEYS}


def _gets_existing(actor_options: dict) -> bool:
    """`.options(name=..., get_if_exists=True)` of a named actor that exists (SkyRL's workers get its registry actors
    so): a handle to that actor, which is neither created here nor a child of this process."""
    name = actor_options.get("name")
    if not actor_options.get("get_if_exists") or not name:
        return False
    import ray

    try:
        ray.get_actor(name, namespace=actor_options.get("namespace"))
    except ValueError:
        return False
    return True


class ActorCreationHook:
    def __init__(self, host: ProfiledProcess) -> None:
        self.host = host
        # A driver's or controller's part: the step anatomy names the actors it creates, its controller classes.
        self.controller = host if isinstance(host, Controller) else None
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
        host = self.host
        class_name = class_name_of(actor_class)
        actor_name = actor_options.get("name")
        runtime_env = actor_options.get("runtime_env") or {}
        roles = roles_of(actor_class)
        framework = framework_of(actor_class)
        own = WorkerIdentity(class_name, actor_name, 0, roles=roles, framework=framework)
        rank = rank_from_env_vars(runtime_env.get("env_vars"))
        identity = WorkerIdentity(
            class_name, actor_name, host.ranks.take(own.name) if rank is None else rank, roles=roles,
            framework=framework,
        )  # fmt: skip
        matches = match_worker(host.plan, identity)
        parent = host.identity
        if matches or parent is None:
            return identity, matches, None
        child_name = f"{parent.name}.{snake_case(class_name)}"
        child = WorkerIdentity(class_name, actor_name, host.ranks.take(f"child:{child_name}"), child_name)
        inherited = tuple(
            Match(backend, target, parent.name)
            for kind, target in host.targets.items()
            if target is not None and (backend := host.plan.backend(kind)) is not None
        )
        return child, inherited, parent.name

    def wrap(self, original_remote):
        hook = self

        def _remote(actor_class, args=None, kwargs=None, **actor_options):
            if _gets_existing(actor_options):  # no actor is created: the named one is returned as it is
                return original_remote(actor_class, args, kwargs, **actor_options)
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
                handle = original_remote(actor_class, args, kwargs, **actor_options)
                return hook.created(handle, identity, bool(matches))
            try:
                handle = original_remote(actor_class, args, kwargs, **options)
            except (ValueError, TypeError) as err:
                # Ray refuses the combined runtime_env (e.g. `image_uri` beside other fields): create as asked.
                logger.warning(
                    "actor %s runs unprofiled: Ray refused its profiling runtime_env: %s", identity.name, err
                )
                return hook.created(original_remote(actor_class, args, kwargs, **actor_options), identity, False)
            if any(m.backend.steps is not None for m in matches):
                hook.host.tracker.add(TrackedActor(handle, identity, tuple(m.backend.kind for m in matches)))
            return hook.created(handle, identity, bool(matches))

        _remote.__wrapped__ = original_remote
        return _remote

    def created(self, handle: Any, identity: WorkerIdentity, matched: bool = True) -> Any:
        """Every actor this process creates, matched or not: known to the step marker, named for the anatomy."""
        self.host.know_actor(handle, identity, held=self.host.plan.on_demand is not None or self.host.kind == CHILD)
        if not matched and self.controller is not None and self.host.identity is None:
            self.controller.remember_created(handle)
        anatomy = self.controller.anatomy if self.controller is not None else None
        if anatomy is not None:
            anatomy.actor_created(handle, identity.name, identity.rank, identity.class_name)
        return handle

    def prepare(self, actor_class: Any, actor_options: dict) -> tuple[dict | None, WorkerIdentity, tuple[Match, ...]]:
        """The actor's options with its runtime_env fragment merged in (None when nothing changes), and who it is."""
        host = self.host
        in_worker = host.identity is not None
        # A Ray worker's actors inherit its runtime_env (nrlprof shipped in it); a child process's do not.
        inherits = in_worker and host.kind != CHILD
        user_env = actor_options.get("runtime_env")
        if _opted_out(user_env):
            identity, matches, fragment = WorkerIdentity(class_name_of(actor_class), None, 0), (), {}
        else:
            identity, matches, parent = self.identify(actor_class, actor_options)
            if matches:
                log_matches(identity, matches, parent)
            fragment = fragment_for(host.plan, identity, matches, parent)
            controller = self.controller
            if controller is not None and controller.launches_as_controller(identity.class_name) and not matches:
                fragment = self.controller_fragment(identity)
            if matches and not inherits:
                fragment.update(self.package())
            if any(m.backend.kind == NSYS for m in matches) or NSYS_FRAGMENT_KEY in fragment:
                user_env = _without_own_nsight(user_env, identity)
        if in_worker:
            fragment = {**isolation_from_parent(matches, job_setup_hook()), **isolation_overrides(), **fragment}
        if not fragment:
            return None, identity, matches
        merged = merge_runtime_env(user_env, fragment, job_setup_hook())
        if (matches or NSYS_FRAGMENT_KEY in fragment) and needs_prefix(None if inherits else self.package()):
            # Some node's runtime-env agent would run Ray's unfixed plugin: nsys goes in front of the interpreter.
            merged = dict(prefixed_runtime_env(merged))
        return {**actor_options, "runtime_env": rayapi.parse_runtime_env(merged)}, identity, matches

    def controller_fragment(self, identity: WorkerIdentity) -> dict:
        """The controller actor under nsys with the controller's options (verl's controller_nsight_options)."""
        options = self.host.plan.controller_nsys_options
        if not options:
            return {}
        logger.info("controller actor '%s' runs under nsys with the controller's options", identity.name)
        return {NSYS_FRAGMENT_KEY: dict(options)}


NSYS_FRAGMENT_KEY = "_nsight"


def install(host: ProfiledProcess) -> ActorCreationHook:
    hook = ActorCreationHook(host)
    patches.install(PATCH_NAME, *rayapi.actor_creation(), hook.wrap)
    return hook
