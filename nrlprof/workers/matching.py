"""Which backends profile a worker, and through which pattern."""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

from nrlprof.config.frameworks.rlinf import RLINF_ALL_GROUPS
from nrlprof.config.plan import NSYS, ROCPROF, BackendPlan, Plan, Target
from nrlprof.log import logger
from nrlprof.workers.frameworks import RLINF
from nrlprof.workers.identity import WorkerIdentity, rlinf_group

TOOL_NAMES = {NSYS: "Nsight", ROCPROF: "rocprof-sys"}


@dataclass(frozen=True)
class Match:
    backend: BackendPlan
    target: Target
    matched_name: str


def name_matches(target: Target, name: str) -> bool:
    """Whether the target's pattern matches one name. A target from RLinf's `worker_groups` means what it means
    to RLinf: group names compared without case, and `all` for every group."""
    if not target.rlinf_groups:
        return fnmatchcase(name, target.pattern)
    pattern = target.pattern.lower()
    return pattern == RLINF_ALL_GROUPS or fnmatchcase(name.lower(), pattern)


def matched_name(target: Target, identity: WorkerIdentity) -> str | None:
    """The first of the worker's names that the target's pattern matches; RLinf's `all` selects RLinf's worker
    groups only, not the other actors of the job."""
    if target.rlinf_groups and target.pattern.lower() == RLINF_ALL_GROUPS:
        return rlinf_group(identity.actor_name) if identity.framework == RLINF else None
    return next((name for name in identity.match_names if name_matches(target, name)), None)


def match_backend(backend: BackendPlan, identity: WorkerIdentity) -> Match | None:
    """The first target whose ranks include the worker and whose pattern matches one of its names."""
    for target in backend.targets:
        if target.selects_rank(identity.rank) and (name := matched_name(target, identity)) is not None:
            return Match(backend, target, name)
    return None


def match_worker(plan: Plan, identity: WorkerIdentity) -> tuple[Match, ...]:
    return tuple(m for m in (match_backend(b, identity) for b in plan.backends) if m is not None)


def log_matches(identity: WorkerIdentity, matches: tuple[Match, ...], parent: str | None = None) -> None:
    """`Nsight profiling enabled for worker 'W' (matched pattern 'P')`, one line per backend."""
    for match in matches:
        tool = TOOL_NAMES.get(match.backend.kind, match.backend.kind.capitalize())
        if parent is None:
            logger.info(
                "%s profiling enabled for worker '%s' (matched pattern '%s')", tool, identity.name, match.target.pattern
            )
            if match.matched_name != identity.name:
                logger.info("worker '%s' matched by its name '%s'", identity.name, match.matched_name)
        else:
            logger.info(
                "%s profiling enabled for worker '%s' (created by '%s', which matched pattern '%s')",
                tool,
                identity.name,
                parent,
                match.target.pattern,
            )
