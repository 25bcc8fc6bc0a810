"""The NRL_* variable names and the cheap "is anything configured?" test (stdlib only, nothing imported)."""

from __future__ import annotations

from collections.abc import Mapping

CONFIG_FILE_VARIABLE = "NRL_PROFILE_CONFIG"
LOG_LEVEL_VARIABLE = "NRL_PROFILE_LOG_LEVEL"
TIMEOUT_VARIABLE = "NRL_PROFILE_TIMEOUT_S"
TORCH_DIR_VARIABLE = "NRL_TORCH_PROFILE_DIR"
NSYS_EXTRA_OPTIONS_VARIABLE = "NRL_NSYS_EXTRA_OPTIONS"
ROCPROF_ARGS_VARIABLE = "NRL_ROCPROF_ARGS"
ROCPROF_ENV_VARIABLE = "NRL_ROCPROF_ENV"
ROCPROF_OUTPUT_DIR_VARIABLE = "NRL_ROCPROF_OUTPUT_DIR"

# Per backend: the prefix of its <prefix>_WORKER_PATTERNS, _RANKS, _DISCRETE, _DISCRETE_METHODS variables.
NSYS_PREFIX = "NRL_NSYS"
TORCH_PREFIX = "NRL_TORCH_PROFILE"
ROCPROF_PREFIX = "NRL_ROCPROF"
MEMORY_PREFIX = "NRL_MEMORY_PROFILE"
BACKEND_PREFIXES = (NSYS_PREFIX, TORCH_PREFIX, ROCPROF_PREFIX, MEMORY_PREFIX)

NSYS_STEP_VARIABLE = "NRL_NSYS_PROFILE_STEP_RANGE"
TORCH_STEP_VARIABLE = "NRL_TORCH_PROFILE_STEP_RANGE"
ROCPROF_STEP_VARIABLE = "NRL_ROCPROF_PROFILE_STEP_RANGE"
MEMORY_STEP_VARIABLE = "NRL_MEMORY_PROFILE_STEP_RANGE"
MEMORY_DIR_VARIABLE = "NRL_MEMORY_PROFILE_DIR"
MEMORY_MAX_ENTRIES_VARIABLE = "NRL_MEMORY_PROFILE_MAX_ENTRIES"
MEMORY_ON_OOM_VARIABLE = "NRL_MEMORY_PROFILE_ON_OOM"
MEMORY_STACKS_VARIABLE = "NRL_MEMORY_PROFILE_STACKS"
ANATOMY_VARIABLE = "NRL_STEP_ANATOMY"
ANATOMY_DIR_VARIABLE = "NRL_STEP_ANATOMY_DIR"
DISABLE_VARIABLE = "NRL_PROFILE_DISABLE"
STEP_METHOD_VARIABLE = "NRL_STEP_METHOD"
FRAMEWORK_CONFIG_VARIABLE = "NRL_PROFILE_FRAMEWORK_CONFIG"
# Arms a job for windows asked for while it runs (`nrlprof capture`).
ON_DEMAND_VARIABLE = "NRL_PROFILE_ON_DEMAND"
# NRL_NSYS_PROFILE_STEP_RANGE's value that launches the nsys workers with no window until one is asked for.
NSYS_ON_DEMAND = "on-demand"
# Windows that open themselves when a step is slow: NRL_<backend>_STEP_RANGE=slow (or slow:keep), and their settings.
SLOW_STEPS_VARIABLE = "NRL_PROFILE_SLOW_STEPS"
SLOW_FACTOR_VARIABLE = "NRL_PROFILE_SLOW_FACTOR"
SLOW_MAX_VARIABLE = "NRL_PROFILE_SLOW_MAX"
SLOW_VARIABLES = (SLOW_STEPS_VARIABLE, SLOW_FACTOR_VARIABLE, SLOW_MAX_VARIABLE)
# Read by `nrlprof explain`, not by the job: the RL phase of each worker method (tools.advice.phases).
PHASES_VARIABLE = "NRL_PHASES"

TORCH_FLAG_VARIABLES = {
    "record_shapes": "NRL_TORCH_PROFILE_RECORD_SHAPES",
    "profile_memory": "NRL_TORCH_PROFILE_MEMORY",
    "with_stack": "NRL_TORCH_PROFILE_WITH_STACK",
    "with_flops": "NRL_TORCH_PROFILE_WITH_FLOPS",
    "gzip": "NRL_TORCH_PROFILE_GZIP",
}

# Variables that select workers; any of them (or the config file) activates nrlprof in a driver.
SELECTING_VARIABLES = (
    f"{NSYS_PREFIX}_WORKER_PATTERNS",
    NSYS_STEP_VARIABLE,
    f"{TORCH_PREFIX}_WORKER_PATTERNS",
    TORCH_STEP_VARIABLE,
    f"{ROCPROF_PREFIX}_WORKER_PATTERNS",
    ROCPROF_STEP_VARIABLE,
    f"{MEMORY_PREFIX}_WORKER_PATTERNS",
    MEMORY_STEP_VARIABLE,
    CONFIG_FILE_VARIABLE,
)

# Set by nrlprof in the runtime env of a profiled worker.
WORKER_PLAN_VARIABLE = "NRLPROF_PLAN"
WORKER_VARIABLE = "NRLPROF_WORKER"
# The driver's plan, for the Ray workers of its job (one of them may be the controller).
JOB_PLAN_VARIABLE = "NRLPROF_JOB_PLAN"
# The pid of the controller or matched worker (a Ray worker process) that started this process.
PARENT_VARIABLE = "NRLPROF_PARENT"
# Set by a matched worker for the processes it starts: where they join its windows (nrlprof.runtime.children.join).
CHANNEL_VARIABLE = "NRLPROF_CHANNEL"
# The nsys session a worker armed for nsys on demand was launched in (`nsys launch --session-new`).
NSYS_SESSION_VARIABLE = "NRLPROF_NSYS_SESSION"

# The words a boolean variable is set with.
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


def is_true(value: str | None) -> bool:
    return (value or "").strip().lower() in TRUE_WORDS


def is_configured(environ: Mapping[str, str]) -> bool:
    """A driver has something to profile: a selecting variable is set to a non-blank value."""
    return any((environ.get(name) or "").strip() for name in SELECTING_VARIABLES)


def steps_or_framework_requested(environ: Mapping[str, str]) -> bool:
    """A step marker, or the framework's own profiling config to read when its trainer starts."""
    return bool((environ.get(STEP_METHOD_VARIABLE) or "").strip()) or is_true(environ.get(FRAMEWORK_CONFIG_VARIABLE))


def driver_configured(environ: Mapping[str, str]) -> bool:
    """A driver has work to do: a worker selected for a profiler, step anatomy, a step marker, the framework's own
    config, or windows asked for while the job runs."""
    return (
        is_configured(environ)
        or anatomy_requested(environ)
        or steps_or_framework_requested(environ)
        or on_demand_requested(environ)
    )


def may_activate(environ: Mapping[str, str]) -> bool:
    """`import nrlprof` has work to do: a driver is configured, or this process is a profiled worker or one the
    driver's job forwarded to."""
    return bool(environ.get(WORKER_VARIABLE) or environ.get(JOB_PLAN_VARIABLE)) or driver_configured(environ)


def on_demand_requested(environ: Mapping[str, str]) -> bool:
    """NRL_PROFILE_ON_DEMAND arms the job by itself, with no window planned; so do nsys workers armed for it."""
    return is_true(environ.get(ON_DEMAND_VARIABLE)) or nsys_on_demand(environ)


def nsys_on_demand(environ: Mapping[str, str]) -> bool:
    """NRL_NSYS_PROFILE_STEP_RANGE=on-demand: the nsys workers run under nsys, windows only when asked for."""
    return (environ.get(NSYS_STEP_VARIABLE) or "").strip().lower() == NSYS_ON_DEMAND


def anatomy_requested(environ: Mapping[str, str]) -> bool:
    """NRL_STEP_ANATOMY turns step anatomy on by itself, with no profiler configured."""
    return is_true(environ.get(ANATOMY_VARIABLE))
