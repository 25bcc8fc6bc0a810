"""NRL_* names set in the environment that nrlprof does not read, each with the closest one it reads: a
misspelled variable is named, never silently ignored."""

from __future__ import annotations

from collections.abc import Mapping

from nrlprof.config.host_budget import HOST_BUDGET_VARIABLE
from nrlprof.config.variables import (
    ANATOMY_DIR_VARIABLE,
    ANATOMY_VARIABLE,
    BACKEND_PREFIXES,
    DISABLE_VARIABLE,
    FRAMEWORK_CONFIG_VARIABLE,
    LOG_LEVEL_VARIABLE,
    MEMORY_DIR_VARIABLE,
    MEMORY_MAX_ENTRIES_VARIABLE,
    MEMORY_ON_OOM_VARIABLE,
    MEMORY_STACKS_VARIABLE,
    NSYS_EXTRA_OPTIONS_VARIABLE,
    ON_DEMAND_VARIABLE,
    PHASES_VARIABLE,
    ROCPROF_ARGS_VARIABLE,
    ROCPROF_ENV_VARIABLE,
    ROCPROF_OUTPUT_DIR_VARIABLE,
    SELECTING_VARIABLES,
    SLOW_VARIABLES,
    STEP_METHOD_VARIABLE,
    TIMEOUT_VARIABLE,
    TORCH_DIR_VARIABLE,
    TORCH_FLAG_VARIABLES,
)

NRL_PREFIX = "NRL_"


def known_variables() -> frozenset[str]:
    """Every NRL_* variable nrlprof reads."""
    per_backend = ("_WORKER_PATTERNS", "_RANKS", "_DISCRETE", "_DISCRETE_METHODS")
    names = {f"{prefix}{suffix}" for prefix in BACKEND_PREFIXES for suffix in per_backend}
    names |= set(SELECTING_VARIABLES) | set(TORCH_FLAG_VARIABLES.values()) | set(SLOW_VARIABLES)
    names |= {
        LOG_LEVEL_VARIABLE,
        TIMEOUT_VARIABLE,
        HOST_BUDGET_VARIABLE,
        TORCH_DIR_VARIABLE,
        NSYS_EXTRA_OPTIONS_VARIABLE,
        ROCPROF_ARGS_VARIABLE,
        ROCPROF_ENV_VARIABLE,
        ROCPROF_OUTPUT_DIR_VARIABLE,
        MEMORY_DIR_VARIABLE,
        MEMORY_MAX_ENTRIES_VARIABLE,
        MEMORY_ON_OOM_VARIABLE,
        MEMORY_STACKS_VARIABLE,
        ANATOMY_VARIABLE,
        ANATOMY_DIR_VARIABLE,
        DISABLE_VARIABLE,
        STEP_METHOD_VARIABLE,
        FRAMEWORK_CONFIG_VARIABLE,
        ON_DEMAND_VARIABLE,
        PHASES_VARIABLE,
    }
    return frozenset(names)


def misspelled_variables(environ: Mapping[str, str]) -> dict[str, str | None]:
    """NRL_* names set here that nrlprof does not read, each with the closest name it reads (None: no close one;
    frameworks keep NRL_* settings of their own, such as NeMo RL's NRL_FORCE_REBUILD_VENVS)."""
    known = known_variables()
    unknown = sorted(name for name in environ if name.startswith(NRL_PREFIX) and name not in known)
    if not unknown:
        return {}
    import difflib

    return {name: next(iter(difflib.get_close_matches(name, known, n=1, cutoff=0.8)), None) for name in unknown}


def partner_hint(environ: Mapping[str, str], missing: str) -> str:
    """`NRL_NSYS_WORKER_PATTERN is set: did you mean NRL_NSYS_WORKER_PATTERNS?` for a missing partner variable."""
    for name, closest in misspelled_variables(environ).items():
        if closest == missing:
            return f"; {name} is set: did you mean {missing}?"
    return ""
