"""Which backends profile a worker, and through which pattern."""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

from nrlprof.config.plan import BackendPlan, Plan, Target
from nrlprof.workers.identity import WorkerIdentity


@dataclass(frozen=True)
class Match:
    backend: BackendPlan
    target: Target
    matched_name: str


def match_backend(backend: BackendPlan, identity: WorkerIdentity) -> Match | None:
    """The first target whose ranks include the worker and whose pattern matches one of its names."""
    for target in backend.targets:
        if not target.selects_rank(identity.rank):
            continue
        for name in identity.match_names:
            if fnmatchcase(name, target.pattern):
                return Match(backend, target, name)
    return None


def match_worker(plan: Plan, identity: WorkerIdentity) -> tuple[Match, ...]:
    return tuple(m for m in (match_backend(b, identity) for b in plan.backends) if m is not None)
