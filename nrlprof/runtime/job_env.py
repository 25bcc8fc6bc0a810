"""The driver's side of a job whose controller may be an actor: its settings go out, its controllers finish.

A process that runs the training loop as a Ray actor (verl's TaskRunner, OpenRLHF's PPOTrainer) is a
controller. On a `ray start` cluster its raylet was started without the driver's variables, so `ray.init`
carries them in the job's runtime_env (the user's own env_vars win). A `ray.init` that starts its own cluster
puts them in the environment its raylet inherits instead: Ray starts every worker of a job with a runtime_env
through `setup_worker.py`, which imports Ray once more before it execs the worker (twice a worker's start-up CPU).
Ray ends actors without running their exit hooks, so when the driver exits, the actors it created that became
controllers close their windows.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from nrlprof import rayapi
from nrlprof.config.variables import ANATOMY_DIR_VARIABLE, JOB_PLAN_VARIABLE
from nrlprof.log import logger
from nrlprof.process import patches, state
from nrlprof.process.kind import CONTROLLER
from nrlprof.process.lifecycle import CONTROLLER_ACTORS, LIFECYCLE

if TYPE_CHECKING:
    from nrlprof.runtime.controller import Controller

PATCH_NAME = "ray.init (the job's env_vars)"
PREFIX = "NRL_"


def forwarded_variables(plan_json: str, anatomy_dir: str | None, environ: Mapping[str, str] = os.environ) -> dict:
    variables = {name: value for name, value in environ.items() if name.startswith(PREFIX)}
    variables[JOB_PLAN_VARIABLE] = plan_json
    if anatomy_dir:
        variables[ANATOMY_DIR_VARIABLE] = anatomy_dir
    return variables


def with_variables(runtime_env: Any, variables: Mapping[str, str]) -> Any:
    """The job's runtime_env with the variables added under its own env_vars, which win."""
    merged = dict(runtime_env or {})
    merged["env_vars"] = {**variables, **(merged.get("env_vars") or {})}
    return merged


def starts_own_cluster(args: tuple, kwargs: Mapping[str, Any]) -> bool:
    """Whether this `ray.init(*args, **kwargs)` starts a local cluster (its raylet inherits this environment).

    Asks Ray's own reading of the address (the argument, RAY_ADDRESS, a cluster started here by `ray start`);
    anything it cannot read, or a Ray Client address, counts as a cluster of someone else's.
    """
    return rayapi.starts_own_cluster(kwargs.get("address", args[0] if args else None), kwargs.get("_temp_dir"))


@contextlib.contextmanager
def inherited(variables: Mapping[str, str]) -> Iterator[None]:
    """The variables in this process's environment while the cluster's processes start, as they were after."""
    before = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def install(session: Controller) -> None:
    import ray

    def wrap(original_init):
        def init(*args, **kwargs):
            anatomy = session.anatomy
            variables = forwarded_variables(session.plan.to_json(), anatomy.settings.directory if anatomy else None)
            if starts_own_cluster(args, kwargs):
                with inherited(variables):
                    context = original_init(*args, **kwargs)
            else:
                kwargs["runtime_env"] = with_variables(kwargs.get("runtime_env"), variables)
                context = original_init(*args, **kwargs)
            LIFECYCLE.add(CONTROLLER_ACTORS, lambda: finish_controllers(session))  # and after Ray's exit hook
            return context

        init.__wrapped__ = original_init
        init.__doc__ = original_init.__doc__
        return init

    patches.install(PATCH_NAME, ray, "init", wrap)


def finish_in_actor(_actor_instance: object) -> bool:
    """Runs inside an actor: a controller that stepped closes its windows (its files are written)."""
    session = state.session
    if session is None or session.kind != CONTROLLER or not session.stepped:
        return False
    session.finish()
    return True


def finish_controllers(session: Controller) -> None:
    """The actors this driver created (and still holds) that became controllers close their windows."""
    handles = session.created_actors()
    if not handles or state.session is not session:
        return
    import ray

    if not ray.is_initialized():
        return
    refs = []
    for handle in handles:
        try:
            refs.append(rayapi.call_in_actor(handle, finish_in_actor))
        except Exception:
            continue
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=session.plan.timeout_s)
    finished = 0
    for ref in ready:
        try:
            finished += bool(ray.get(ref))
        except Exception:
            continue
    if finished:
        logger.info("%d controller actor(s) closed their windows as the driver exits", finished)
