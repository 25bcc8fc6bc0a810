"""Sending window actions to tracked actors through `__ray_call__`, in order with their work."""

from __future__ import annotations

from nrlprof.log import logger
from nrlprof.runtime.process import Action
from nrlprof.workers.tracker import Tracker


def apply_in_actor(_actor_instance: object, actions: tuple[Action, ...]) -> list[dict]:
    """Runs inside a worker: its own backends, then its tracked children."""
    from nrlprof.runtime import session as activation
    state = activation.worker_state()
    if state is None:
        return []
    records = state.process.apply(actions)
    if len(state.tracker):
        records += dispatch(state.tracker, actions, state.plan.timeout_s)
    return records


def dispatch(tracker: Tracker, actions: tuple[Action, ...], timeout_s: float) -> list[dict]:
    """Apply the actions in every tracked actor; dead or silent actors are logged and skipped."""
    import ray
    from ray.exceptions import RayActorError

    pending = {}
    for actor in tracker.actors():
        try:
            pending[actor.handle.__ray_call__.remote(apply_in_actor, actions)] = actor
        except Exception as err:
            logger.warning("could not reach worker '%s' rank %s: %s", actor.identity.name, actor.identity.rank, err)
    if not pending:
        return []
    ready, late = ray.wait(list(pending), num_returns=len(pending), timeout=timeout_s)
    records: list[dict] = []
    for ref in ready:
        actor = pending[ref]
        try:
            records += ray.get(ref)
        except RayActorError as err:
            logger.warning(
                "worker '%s' rank %s is dead; it is no longer profiled (%s)",
                actor.identity.name,
                actor.identity.rank,
                type(err).__name__,
            )
            tracker.remove(actor)
        except Exception as err:
            logger.warning(
                "worker '%s' rank %s failed a window action: %s", actor.identity.name, actor.identity.rank, err
            )
    for ref in late:
        actor = pending[ref]
        logger.warning(
            "worker '%s' rank %s did not answer within %.0f s (NRL_PROFILE_TIMEOUT_S); skipped for this action",
            actor.identity.name,
            actor.identity.rank,
            timeout_s,
        )
    return records
