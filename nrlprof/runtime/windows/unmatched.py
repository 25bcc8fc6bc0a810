"""A window that opens in no worker: when no live actor matches the backend's patterns, the log says so once
and lists the names the cluster's workers can be matched by, as their frameworks name them (a NeMo RL run
with `megatron_policy_worker` as its pattern and DTensor policy workers)."""

from __future__ import annotations

from nrlprof import rayapi
from nrlprof.config.plan import BackendPlan
from nrlprof.log import logger
from nrlprof.workers.matching import match_backend

MAX_NAMES = 30


def tell_if_nothing_matched(backend: BackendPlan) -> bool:
    """True when it told (no live actor matches); False when one matches or the cluster cannot be read.

    Only where this process is connected to Ray: a driver that never started Ray has no workers to list, and
    importing Ray (seconds) at its window's start would hold up that step.
    """
    if not rayapi.connected():
        return False
    try:
        from nrlprof.workers.live import live_actors

        actors = live_actors()
    except Exception:
        return False
    if any(match_backend(backend, actor.identity) is not None for actor in actors):
        return False
    names = sorted({name for actor in actors for name in actor.identity.match_names})
    shown = ", ".join(names[:MAX_NAMES]) + (f", ... ({len(names) - MAX_NAMES} more)" if len(names) > MAX_NAMES else "")
    logger.warning(
        "%s: no worker matched pattern(s) '%s'; the workers there are, by the names a pattern can match: %s",
        backend.kind,
        ",".join(t.pattern for t in backend.targets),
        shown or "none",
    )
    return True
