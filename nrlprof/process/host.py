"""What the framework adapters use of the process's part that the activation gives them (nrlprof.runtime.profiled's
ProfiledProcess, nrlprof.runtime.controller's Controller): they sit below the runtime, so they see it through this."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from nrlprof.log import logger

if TYPE_CHECKING:
    from nrlprof.config.plan import Plan, Target
    from nrlprof.workers.identity import WorkerIdentity


class Host(Protocol):
    """Any process's part: what it profiles, as whom."""

    kind: str
    plan: Plan
    identity: WorkerIdentity | None
    targets: dict[str, Target | None]

    def finish(self) -> None: ...


class ControllerHost(Host, Protocol):
    """A driver's or controller's: the steps an adapter finds, the actor classes launched as the controller (verl's
    TaskRunner), a framework's own profiling settings (a mapping, or a Plan) taken as `nrlprof.configure` does."""

    controller_classes: set[str]

    def framework_step(self, step: int, source: str) -> None: ...

    def ask_reconfiguration(self, config: Mapping[str, Any] | Plan) -> None: ...


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
