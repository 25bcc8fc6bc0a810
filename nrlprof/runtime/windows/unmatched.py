"""A pattern that selects no worker of the job: at a backend's first window, each of its patterns that no worker of
the job matches gets one warning naming it and the names the job's workers can be matched by, as their frameworks
name them (`megatron_policy_worker` in a NeMo RL run of DTensor policy workers; RLinf's `ActorGroup:*`, the Ray actor
name, where RLinf's patterns match group names). The job's workers: those this controller tracks for the backend,
the actors it created or called (as it named them), and the job's live actors in the cluster."""

from __future__ import annotations

from collections.abc import Iterable
from fnmatch import fnmatchcase

from nrlprof import rayapi
from nrlprof.config.plan import BackendPlan, Target
from nrlprof.log import logger
from nrlprof.workers.frameworks import PATTERN_MEANS
from nrlprof.workers.identity import WorkerIdentity, snake_case
from nrlprof.workers.matching import matched_name

MAX_NAMES = 30


def selects(target: Target, identity: WorkerIdentity) -> bool:
    return target.selects_rank(identity.rank) and matched_name(target, identity) is not None


def tell_unmatched_patterns(backend: BackendPlan, tracked: Iterable[WorkerIdentity]) -> tuple[str, ...]:
    """The backend's patterns that select no worker of the job, each told once; `tracked`: the workers this controller
    drives for the backend. Nothing is told where the job's workers cannot be read (Ray not connected here: a driver
    that never started Ray, whose window start must not wait for Ray's import)."""
    tracked = list(tracked)
    unmatched = [t for t in backend.targets if not any(selects(t, identity) for identity in tracked)]
    if not unmatched or not rayapi.connected():
        return ()
    try:
        workers = job_workers()
    except Exception:
        return ()
    workers += tracked
    unmatched = [t for t in unmatched if not any(selects(t, identity) for identity in workers)]
    names = sorted({name for identity in workers for name in identity.match_names})
    shown = ", ".join(names[:MAX_NAMES]) + (f", ... ({len(names) - MAX_NAMES} more)" if len(names) > MAX_NAMES else "")
    for target in unmatched:
        logger.warning(
            "%s: pattern '%s' selects no worker of this job; its workers can be matched by: %s%s",
            backend.kind,
            target.pattern,
            shown or "none (no worker is alive)",
            _hint(target.pattern, workers),
        )
    return tuple(t.pattern for t in unmatched)


def job_workers() -> list[WorkerIdentity]:
    """The job's live actors, each under the identity this process gave it where it created or called it, else the one
    its creator gave it where it is profiled (its descriptor: roles the cluster's actor table does not hold), else as
    the cluster's actor table names it."""
    import ray

    from nrlprof.process import state
    from nrlprof.workers.live import live_actors

    session = state.session
    known = dict(session.known_actors) if session is not None else {}
    job = ray.get_runtime_context().get_job_id()
    return [known.get(actor.actor_id) or _described(actor) for actor in live_actors(job)]


def _described(actor) -> WorkerIdentity:
    from nrlprof.config.variables import WORKER_VARIABLE
    from nrlprof.launch.runtime_env import parse_worker_descriptor

    text = actor.env_vars.get(WORKER_VARIABLE)
    if text:
        try:
            return parse_worker_descriptor(text).identity
        except (ValueError, KeyError, TypeError):
            pass
    return actor.identity


def _hint(pattern: str, workers: list[WorkerIdentity]) -> str:
    """Where the pattern matches a worker's Ray actor name or class, which its framework's patterns do not match."""
    for identity in workers:
        for kind, name in (("Ray actor name", identity.actor_name), ("class", identity.class_name),
                           ("class", snake_case(identity.class_name))):  # fmt: skip
            if name and name not in identity.match_names and fnmatchcase(name, pattern):
                means = PATTERN_MEANS.get(identity.framework or "", "")
                return (f" ('{name}' is the {kind} of worker '{identity.name}'"
                        + (f"; under {means[0]} a pattern matches {means[1]})" if means else ")"))  # fmt: skip
    return ""
