"""What the framework adapters use of the process's Session (nrlprof.runtime.session), which the activation gives
them: they sit below the runtime, so they see it through this."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from nrlprof.config.plan import Plan, Target
    from nrlprof.workers.identity import WorkerIdentity


class Host(Protocol):
    kind: str
    plan: Plan
    identity: WorkerIdentity | None
    targets: dict[str, Target | None]
    # Class names of actors to launch as the controller (verl's TaskRunner under controller_nsight_options).
    controller_classes: set[str]
    # A framework's own profiling config (a mapping), read as `nrlprof.configure` reads it.
    read_framework_config: Callable[[object], object] | None

    def framework_step(self, step: int, source: str) -> None: ...

    def finish(self) -> None: ...
