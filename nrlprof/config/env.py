"""The NRL_* environment variables -> one immutable Plan, validated eagerly."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from nrlprof.config.host_budget import HOST_BUDGET_VARIABLE, parse_host_budget
from nrlprof.config.memory import (
    DEFAULT_MAX_ENTRIES,
    DEFAULT_MEMORY_DIR,
    PYTHON_STACKS,
    memory_options,
    parse_max_entries,
    parse_stacks,
)
from nrlprof.config.misspelled import partner_hint
from nrlprof.config.nsys.options import ARMED_SESSION, SESSION_OPTION, build_nsys_options, normalise_options
from nrlprof.config.plan import (
    DEFAULT_TIMEOUT_S,
    MAX_RANK,
    MEMORY,
    NSYS,
    ROCPROF,
    TORCH,
    BackendPlan,
    OnDemand,
    Plan,
    StepMethod,
    Target,
    TorchSettings,
)
from nrlprof.config.slow import KEEP, KEEP_TEXT, SLOW_TEXT, WINDOW, slow_mode, slow_settings_from_env
from nrlprof.config.steps import StepSelection, parse_step_spec
from nrlprof.config.tool_env import environment_items
from nrlprof.config.variables import (
    CONFIG_FILE_VARIABLE,
    FALSE_WORDS,
    FRAMEWORK_CONFIG_VARIABLE,
    LOG_LEVEL_VARIABLE,
    MEMORY_DIR_VARIABLE,
    MEMORY_MAX_ENTRIES_VARIABLE,
    MEMORY_ON_OOM_VARIABLE,
    MEMORY_PREFIX,
    MEMORY_STACKS_VARIABLE,
    MEMORY_STEP_VARIABLE,
    NSYS_EXTRA_OPTIONS_VARIABLE,
    NSYS_ON_DEMAND,
    NSYS_PREFIX,
    NSYS_STEP_VARIABLE,
    ON_DEMAND_VARIABLE,
    ROCPROF_ARGS_VARIABLE,
    ROCPROF_ENV_VARIABLE,
    ROCPROF_OUTPUT_DIR_VARIABLE,
    ROCPROF_PREFIX,
    ROCPROF_STEP_VARIABLE,
    SELECTING_VARIABLES,
    STEP_METHOD_VARIABLE,
    TIMEOUT_VARIABLE,
    TORCH_DIR_VARIABLE,
    TORCH_FLAG_VARIABLES,
    TORCH_PREFIX,
    TORCH_STEP_VARIABLE,
    TRUE_WORDS,
    is_configured,
    nsys_on_demand,
    on_demand_requested,
)
from nrlprof.errors import ConfigError

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
RANK_TEXT_FORM = f"'all' or a comma list of ranks from 0 to {MAX_RANK} such as '0,1'"
BOOL_WORDS = {**dict.fromkeys(TRUE_WORDS, True), **dict.fromkeys(FALSE_WORDS, False)}
BOOL_FORM = "one of 1/0, true/false, yes/no, on/off"
JSON_OBJECT_FORM = 'a JSON object such as \'{"t": "cuda,nvtx,osrt"}\''
MAX_TIMEOUT_S = 1e6
TIMEOUT_FORM = f"a number of seconds > 0 and <= {MAX_TIMEOUT_S:.0f}, such as 120"
SHOWN_CHARS = 200
# The memory backend's settings: each needs its worker patterns (or a job armed for windows asked for).
MEMORY_SETTINGS = (MEMORY_MAX_ENTRIES_VARIABLE, MEMORY_ON_OOM_VARIABLE, MEMORY_STACKS_VARIABLE, MEMORY_DIR_VARIABLE)


def shown(text: str) -> str:
    """The value as an error shows it: long inputs cut, their length said."""
    return text if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS]}... ({len(text)} characters)"


def parse_patterns(text: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in text.split(",") if p.strip())


def _rank(item: str, variable: str, text: str) -> int:
    if not (item.isascii() and item.isdigit()):
        raise ConfigError(variable, shown(text), RANK_TEXT_FORM, f"{shown(item)!r} is not a rank")
    magnitude = item.lstrip("0") or "0"
    if len(magnitude) > len(str(MAX_RANK)) or int(magnitude) > MAX_RANK:
        raise ConfigError(variable, shown(text), RANK_TEXT_FORM, f"{shown(item)} is above {MAX_RANK}")
    return int(magnitude)


def parse_ranks(text: str, variable: str) -> frozenset[int] | None:
    value = text.strip()
    if value.lower() == "all":
        return None
    ranks = {_rank(item.strip(), variable, text) for item in value.split(",") if item.strip()}
    if not ranks:
        raise ConfigError(variable, text, RANK_TEXT_FORM, "no rank given")
    return frozenset(ranks)


def parse_bool(text: str, variable: str) -> bool:
    try:
        return BOOL_WORDS[text.strip().lower()]
    except KeyError:
        raise ConfigError(variable, shown(text), BOOL_FORM) from None


def parse_json_object(text: str, variable: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError(variable, shown(text), JSON_OBJECT_FORM, f"not JSON ({err.msg})") from None
    except RecursionError:
        raise ConfigError(variable, shown(text), JSON_OBJECT_FORM, "nested too deeply") from None
    except ValueError as err:
        raise ConfigError(variable, shown(text), JSON_OBJECT_FORM, f"not usable JSON ({err})") from None
    if not isinstance(value, dict):
        raise ConfigError(variable, shown(text), JSON_OBJECT_FORM, "not an object")
    return value


def parsed(
    environ: Mapping[str, str], variable: str, parse: Callable[[str, str], Any], default: Any, *, stripped: bool = False
) -> Any:
    """`parse(value, variable)` where the variable holds more than blanks (the value stripped first where `stripped`),
    else `default`."""
    text = environ.get(variable) or ""
    if not text.strip():
        return default
    return parse(text.strip() if stripped else text, variable)


def selection(
    environ: Mapping[str, str], prefix: str, step_variable: str, *, steps_required: bool
) -> tuple[tuple[Target, ...], StepSelection | None] | None:
    patterns_variable = f"{prefix}_WORKER_PATTERNS"
    patterns = parse_patterns(environ.get(patterns_variable, ""))
    step_text = environ.get(step_variable, "")
    steps = _step_selection(step_text, step_variable)
    if patterns and steps is None and steps_required:
        raise ConfigError(
            step_variable,
            step_text,
            f"a step range such as '3:5' because {patterns_variable} is set{partner_hint(environ, step_variable)}",
        )
    if steps is not None and not patterns:
        raise ConfigError(
            patterns_variable,
            environ.get(patterns_variable, ""),
            "comma-separated worker patterns such as '*policy*' because "
            f"{step_variable} is set{partner_hint(environ, patterns_variable)}",
        )
    if not patterns:
        return None
    ranks = parsed(environ, f"{prefix}_RANKS", parse_ranks, None)
    methods = parse_patterns(environ.get(f"{prefix}_DISCRETE_METHODS", ""))
    discrete = bool(methods) or parsed(environ, f"{prefix}_DISCRETE", parse_bool, False)
    return tuple(Target(p, ranks, discrete, methods) for p in patterns), steps


def _step_selection(text: str, variable: str) -> StepSelection | None:
    """The steps a STEP_RANGE value plans; none for a backend armed for slow steps (its windows open themselves)."""
    if not text.strip():
        return None
    if slow_mode(text) is not None:
        return StepSelection(())
    return parse_step_spec(text, variable)


def _slow_mode(environ: Mapping[str, str], prefix: str, variable: str, targets: tuple[Target, ...]) -> str:
    """WINDOW or KEEP where the variable arms its backend for slow steps, else ''."""
    mode = slow_mode(environ.get(variable, "")) or ""
    if mode == KEEP and any(t.discrete for t in targets):
        raise ConfigError(
            variable,
            environ[variable],
            f"'{SLOW_TEXT}' or a step range such as '3:5' because "
            f"{prefix}_DISCRETE or _DISCRETE_METHODS is set ({KEEP_TEXT} records whole steps)",
        )
    return mode


def _json_variable(environ: Mapping[str, str], variable: str) -> dict:
    return parsed(environ, variable, parse_json_object, {})


def nsys_on_demand_from_env(environ: Mapping[str, str], value: str = NSYS_ON_DEMAND) -> BackendPlan:
    """Workers launched in an nsys session of their own with nothing collected until a window is asked for
    (NRL_NSYS_PROFILE_STEP_RANGE=on-demand): each window asked for starts a collection in the worker's session
    (`nsys start`), whose report nsys writes when the window closes."""
    patterns_variable = f"{NSYS_PREFIX}_WORKER_PATTERNS"
    patterns = parse_patterns(environ.get(patterns_variable, ""))
    if not patterns:
        because = f"because {NSYS_STEP_VARIABLE}={value}"
        raise ConfigError(
            patterns_variable, environ.get(patterns_variable, ""), f"patterns such as '*policy*' {because}"
        )
    ranks = parsed(environ, f"{NSYS_PREFIX}_RANKS", parse_ranks, None)
    extra = _json_variable(environ, NSYS_EXTRA_OPTIONS_VARIABLE)
    options = dict(build_nsys_options(extra, None, NSYS_EXTRA_OPTIONS_VARIABLE))
    options[SESSION_OPTION] = ARMED_SESSION
    return BackendPlan(NSYS, tuple(Target(p, ranks) for p in patterns), None, options=tuple(options.items()))


def nsys_from_env(environ: Mapping[str, str]) -> BackendPlan | None:
    if nsys_on_demand(environ):
        return nsys_on_demand_from_env(environ)
    text = environ.get(NSYS_STEP_VARIABLE, "")
    mode = slow_mode(text)
    if mode == KEEP:
        raise ConfigError(
            NSYS_STEP_VARIABLE,
            text,
            f"'{SLOW_TEXT}', '{NSYS_ON_DEMAND}' or a step range such as '3:5' "
            f"({KEEP_TEXT} is for torch and memory: nsys cannot keep a step it did not capture)",
        )
    if mode == WINDOW:
        # Launched in an nsys session of their own as for on-demand; each window starts a collection in it.
        armed = nsys_on_demand_from_env(environ, SLOW_TEXT)
        return replace(armed, steps=StepSelection(()), slow=WINDOW, controller=False)
    selected = selection(environ, NSYS_PREFIX, NSYS_STEP_VARIABLE, steps_required=True)
    if selected is None:
        return None
    targets, steps = selected
    extra = _json_variable(environ, NSYS_EXTRA_OPTIONS_VARIABLE)
    discrete = any(t.discrete for t in targets)
    options = build_nsys_options(extra, steps, NSYS_EXTRA_OPTIONS_VARIABLE, discrete=discrete)
    return BackendPlan(NSYS, targets, steps, options=options)


def torch_from_env(environ: Mapping[str, str]) -> BackendPlan | None:
    selected = selection(environ, TORCH_PREFIX, TORCH_STEP_VARIABLE, steps_required=True)
    if selected is None:
        return None
    targets, steps = selected
    return BackendPlan(TORCH, targets, steps, slow=_slow_mode(environ, TORCH_PREFIX, TORCH_STEP_VARIABLE, targets))


def rocprof_from_env(environ: Mapping[str, str]) -> BackendPlan | None:
    text = environ.get(ROCPROF_STEP_VARIABLE, "")
    if slow_mode(text) is not None:
        raise ConfigError(
            ROCPROF_STEP_VARIABLE,
            text,
            "a step range such as '3:5', or unset (rocprof-sys profiles each "
            f"selected worker's whole lifetime: no window opens for a slow step, '{SLOW_TEXT}' and "
            f"'{KEEP_TEXT}' are for torch, memory and nsys)",
        )
    selected = selection(environ, ROCPROF_PREFIX, ROCPROF_STEP_VARIABLE, steps_required=False)
    if selected is None:
        return None
    targets, steps = selected
    args = normalise_options(_json_variable(environ, ROCPROF_ARGS_VARIABLE), ROCPROF_ARGS_VARIABLE)
    env = environment_items(_json_variable(environ, ROCPROF_ENV_VARIABLE), ROCPROF_ENV_VARIABLE)
    output_dir = environ.get(ROCPROF_OUTPUT_DIR_VARIABLE, "").strip() or None
    options = tuple((k, v) for k, v in args.items() if v is not None)
    return BackendPlan(ROCPROF, targets, steps, options=options, env=env, output_dir=output_dir)


def memory_settings_from_env(environ: Mapping[str, str]) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The memory backend's directory and options, as the variables set them (patterns or not)."""
    max_entries = parsed(environ, MEMORY_MAX_ENTRIES_VARIABLE, parse_max_entries, DEFAULT_MAX_ENTRIES)
    on_oom = parsed(environ, MEMORY_ON_OOM_VARIABLE, parse_bool, False)
    stacks = parsed(environ, MEMORY_STACKS_VARIABLE, parse_stacks, PYTHON_STACKS)
    directory = environ.get(MEMORY_DIR_VARIABLE, "").strip() or DEFAULT_MEMORY_DIR
    return directory, memory_options(max_entries, on_oom, stacks)


def memory_from_env(environ: Mapping[str, str]) -> BackendPlan | None:
    selected = selection(environ, MEMORY_PREFIX, MEMORY_STEP_VARIABLE, steps_required=True)
    directory, options = memory_settings_from_env(environ)
    if selected is None and not on_demand_requested(environ):
        for variable in MEMORY_SETTINGS:
            if environ.get(variable, "").strip():
                raise ConfigError(
                    f"{MEMORY_PREFIX}_WORKER_PATTERNS",
                    environ.get(f"{MEMORY_PREFIX}_WORKER_PATTERNS", ""),
                    f"worker patterns such as '*policy*' because {variable} is set",
                )
    if selected is None:
        return None
    targets, steps = selected
    slow = _slow_mode(environ, MEMORY_PREFIX, MEMORY_STEP_VARIABLE, targets)
    return BackendPlan(MEMORY, targets, steps, options=options, output_dir=directory, slow=slow)


def on_demand_from_env(environ: Mapping[str, str], default: OnDemand | None) -> OnDemand | None:
    """An armed job's settings for the windows asked for while it runs (NRL_PROFILE_ON_DEMAND)."""
    text = (environ.get(ON_DEMAND_VARIABLE) or "").strip()
    nsys = nsys_on_demand(environ)
    if not text and not nsys:
        return default
    if text and not parse_bool(text, ON_DEMAND_VARIABLE):
        if nsys:
            raise ConfigError(ON_DEMAND_VARIABLE, text, f"1 (or unset) because {NSYS_STEP_VARIABLE}={NSYS_ON_DEMAND}")
        return None
    directory, options = memory_settings_from_env(environ)
    return OnDemand(memory_dir=directory, memory_options=options, nsys=nsys)


def torch_settings_from_env(environ: Mapping[str, str], base: TorchSettings) -> TorchSettings:
    values = dict(base.__dict__)
    directory = environ.get(TORCH_DIR_VARIABLE, "").strip()
    if directory:
        values["directory"] = directory
    for field_name, variable in TORCH_FLAG_VARIABLES.items():
        values[field_name] = parsed(environ, variable, parse_bool, values[field_name])
    return TorchSettings(**values)


def _log_level(environ: Mapping[str, str], default: str) -> str:
    level = environ.get(LOG_LEVEL_VARIABLE, "").strip().upper() or default
    if level not in LOG_LEVELS:
        raise ConfigError(LOG_LEVEL_VARIABLE, shown(environ[LOG_LEVEL_VARIABLE]), "one of " + ", ".join(LOG_LEVELS))
    return level


def parse_timeout(text: str, variable: str = TIMEOUT_VARIABLE) -> float:
    """Seconds: finite, above 0 and at most MAX_TIMEOUT_S (a bigger wait overflows the clocks it is added to)."""
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(variable, shown(text), TIMEOUT_FORM, "not a number") from None
    if not 0 < value <= MAX_TIMEOUT_S:  # also false for nan
        raise ConfigError(variable, shown(text), TIMEOUT_FORM)
    return value


def plan_from_env(environ: Mapping[str, str], base: Plan | None = None) -> Plan:
    """The plan the variables describe; a backend the variables name replaces the base's one."""
    plan = base or Plan()
    sources = list(plan.sources)
    readers = (nsys_from_env, torch_from_env, rocprof_from_env, memory_from_env)
    for backend in (read(environ) for read in readers):
        if backend is not None:
            plan = plan.with_backend(backend)
            sources.append(f"env:{backend.kind}")
    return Plan(
        backends=plan.backends,
        torch=torch_settings_from_env(environ, plan.torch),
        log_level=_log_level(environ, plan.log_level),
        timeout_s=parsed(environ, TIMEOUT_VARIABLE, parse_timeout, plan.timeout_s or DEFAULT_TIMEOUT_S, stripped=True),
        sources=tuple(sources),
        step_method=parsed(environ, STEP_METHOD_VARIABLE, parse_step_method, plan.step_method, stripped=True),
        framework_config=parsed(environ, FRAMEWORK_CONFIG_VARIABLE, parse_bool, plan.framework_config, stripped=True),
        controller_nsys=plan.controller_nsys,
        max_host_mb=parsed(environ, HOST_BUDGET_VARIABLE, parse_host_budget, plan.max_host_mb, stripped=True),
        on_demand=on_demand_from_env(environ, plan.on_demand),
        slow=slow_settings_from_env(environ, any(b.slow for b in plan.backends)),
    )


def parse_step_method(text: str, variable: str = STEP_METHOD_VARIABLE) -> StepMethod:
    """`<worker pattern>.<method pattern>`, split at the last dot (method names have none)."""
    worker, dot, method = text.rpartition(".")
    worker, method = worker.strip(), method.strip()
    if not dot or not worker or not method or "," in text or not all(c.isidentifier() for c in _plain(method)):
        raise ConfigError(
            variable,
            shown(text),
            "'<worker pattern>.<method pattern>' such as '*policy*.train' or '*WorkerDict*.actor_rollout_generate_*'",
        )
    return StepMethod(worker, method)


def _plain(pattern: str) -> list[str]:
    """The identifier parts of an fnmatch pattern (its wildcards and classes left out)."""
    parts = [p for p in pattern.replace("*", " ").replace("?", " ").split() if p]
    return [p for p in parts if "[" not in p and "]" not in p]


def load_plan(environ: Mapping[str, str]) -> Plan:
    """The file named by NRL_PROFILE_CONFIG (if any), with the variables over it."""
    base = None
    if environ.get(CONFIG_FILE_VARIABLE, "").strip():
        from nrlprof.config.files import plan_from_file

        base = plan_from_file(environ[CONFIG_FILE_VARIABLE].strip())
    return plan_from_env(environ, base)


__all__ = ["SELECTING_VARIABLES", "StepSelection", "is_configured", "load_plan", "plan_from_env"]
