"""The runtime_env fragment of a matched worker, and merging it under the user's own keys."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from nrlprof import wire
from nrlprof.backends import backend_class
from nrlprof.config.plan import Plan, Target
from nrlprof.config.variables import NSYS_SESSION_VARIABLE, WORKER_VARIABLE
from nrlprof.config.variables import WORKER_PLAN_VARIABLE as PLAN_VARIABLE
from nrlprof.workers.identity import WorkerIdentity
from nrlprof.workers.matching import Match

USER_SETUP_HOOK_VARIABLE = "NRLPROF_USER_SETUP_HOOK"
SETUP_HOOK = "nrlprof.runtime.worker_setup.setup"
# Ray runs the hook named here at worker start; it honours `worker_process_setup_hook` only per job.
RAY_SETUP_HOOK_VARIABLE = "__RAY_WORKER_PROCESS_SETUP_HOOK_ENV_VAR"


@dataclass(frozen=True)
class WorkerDescriptor:
    """Who a matched worker is, the target each of its backends matched it through (its ranks left out: the match
    is made), and the profiled worker that created it and gates it, if one did (NRLPROF_WORKER)."""

    identity: WorkerIdentity
    targets: dict[str, Target]
    parent: str | None = None


def worker_descriptor(identity: WorkerIdentity, matches: tuple[Match, ...], parent: str | None = None) -> str:
    targets = {m.backend.kind: replace(m.target, ranks=None) for m in matches}
    return wire.encode(WorkerDescriptor(identity, targets, parent))


def parse_worker_descriptor(text: str) -> WorkerDescriptor:
    return wire.decode(text, WorkerDescriptor)


def fragment_for(plan: Plan, identity: WorkerIdentity, matches: tuple[Match, ...], parent: str | None = None) -> dict:
    """What a matched worker's runtime_env needs: tool wrappers, the plan, who it is, the setup hook."""
    if not matches:
        return {}
    fragment: dict = {}
    for match in matches:
        fragment.update(backend_class(match.backend.kind).runtime_env_fragment(match.backend, identity))
    fragment["env_vars"] = {
        **fragment.get("env_vars", {}),
        PLAN_VARIABLE: plan.to_json(),
        WORKER_VARIABLE: worker_descriptor(identity, matches, parent),
        RAY_SETUP_HOOK_VARIABLE: SETUP_HOOK,
    }
    return fragment


def isolation_from_parent(matches: tuple[Match, ...], earlier_setup_hook: str | None) -> dict:
    """For an actor created inside a profiled worker: drop what Ray would inherit from the parent.

    Ray merges a parent actor's runtime_env into its children's, so without this a child would run
    under the parent's nsys options and believe it is the parent.
    """
    kinds = {m.backend.kind for m in matches}
    overrides: dict = {}
    if "nsys" not in kinds:
        overrides["_nsight"] = None
        overrides["env_vars"] = {NSYS_SESSION_VARIABLE: ""}
    if "rocprof" not in kinds:
        overrides["_rocprof_sys"] = None
    if not matches:
        overrides["env_vars"] = {
            **overrides.get("env_vars", {}),
            PLAN_VARIABLE: "",
            WORKER_VARIABLE: "",
            RAY_SETUP_HOOK_VARIABLE: earlier_setup_hook or "",
        }
    return overrides


def package_fragment() -> dict:
    """nrlprof itself, uploaded to the cluster and shipped to workers as a `py_modules` URI.

    A worker's interpreter (a per-worker venv) then needs no nrlprof installed. Ray takes local
    directories only at the job level, so the package is uploaded here, as `ray.init` would do it.
    Only the driver adds it; actors created inside a worker inherit it from their parent's runtime_env.
    """
    import tempfile

    from nrlprof import rayapi

    package_dir = Path(__file__).parent.parent  # nrlprof/, as `nrlprof.__file__` names it
    package = {"py_modules": [str(package_dir)], "excludes": ["__pycache__", "*.pyc"]}
    with tempfile.TemporaryDirectory(prefix="nrlprof-ship-") as scratch:
        uploaded = rayapi.upload_py_modules(package, scratch)
    return {"py_modules": list(uploaded["py_modules"])}


def merge_runtime_env(user_env: Mapping | None, fragment: Mapping, inherited_setup_hook: str | None = None) -> dict:
    """The user's runtime_env with the fragment added; every key the user set wins, `py_modules` are joined.

    A setup hook the job or the user already has runs after nrlprof's (`NRLPROF_USER_SETUP_HOOK`).
    """
    merged = dict(user_env or {})
    for key, value in fragment.items():
        if key == "py_modules":
            merged[key] = [*(merged.get(key) or []), *value]
            continue
        if key != "env_vars":
            merged.setdefault(key, value)
            continue
        user_vars = dict(merged.get("env_vars") or {})
        env_vars = {**value, **user_vars}
        earlier_hook = user_vars.get(RAY_SETUP_HOOK_VARIABLE) or inherited_setup_hook
        if earlier_hook and earlier_hook != SETUP_HOOK:
            env_vars[RAY_SETUP_HOOK_VARIABLE] = SETUP_HOOK
            env_vars[USER_SETUP_HOOK_VARIABLE] = earlier_hook
        merged["env_vars"] = env_vars
    return merged
