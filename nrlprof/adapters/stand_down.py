"""A framework's own profiler standing down where nrlprof runs the same backend (verl's, SkyRL's, slime's)."""

from __future__ import annotations

from collections.abc import Callable

from nrlprof.log import logger
from nrlprof.process.host import Host


def standing_down(session: Host, framework: str) -> Callable[[str, str], bool]:
    """`ours(kind, what)`: whether nrlprof runs its `kind` backend in this worker, so that the framework's own `what`
    stands down there (said once per `what`)."""
    told: set[str] = set()

    def ours(kind: str, what: str) -> bool:
        if session.targets.get(kind) is None:
            return False
        if what not in told:
            told.add(what)
            logger.info(
                "worker '%s' rank %s: %s's own %s stands down; nrlprof's %s runs in this process",
                session.identity.name,
                session.identity.rank,
                framework,
                what,
                kind,
            )
        return True

    return ours
