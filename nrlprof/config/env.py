"""The NRL_* environment variables -> one immutable Plan, validated eagerly."""

from __future__ import annotations

import json
from collections.abc import Mapping

from nrlprof.config.nsys_options import merge_options, normalise_options, nsys_default_options
from nrlprof.config.plan import (
    DEFAULT_TIMEOUT_S,
    NSYS,
    ROCPROF,
    TORCH,
    BackendPlan,
    Plan,
    Target,
    TorchSettings,
)
from nrlprof.config.steps import StepSelection, parse_step_spec
from nrlprof.errors import ConfigError

CONFIG_FILE_VARIABLE = "NRL_PROFILE_CONFIG"
LOG_LEVEL_VARIABLE = "NRL_PROFILE_LOG_LEVEL"
TIMEOUT_VARIABLE = "NRL_PROFILE_TIMEOUT_S"
TORCH_DIR_VARIABLE = "NRL_TORCH_PROFILE_DIR"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
RANKS_FORM = "'all' or a comma list of ranks >= 0 such as '0,1'"
BOOL_WORDS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}

# Variables that select workers; any of them (or the config file) activates nrlprof.
SELECTING_VARIABLES = (
    "NRL_NSYS_WORKER_PATTERNS",
    "NRL_NSYS_PROFILE_STEP_RANGE",
    "NRL_TORCH_PROFILE_WORKER_PATTERNS",
    "NRL_TORCH_PROFILE_STEP_RANGE",
    "NRL_ROCPROF_WORKER_PATTERNS",
    "NRL_ROCPROF_PROFILE_STEP_RANGE",
    CONFIG_FILE_VARIABLE,
)

TORCH_FLAG_VARIABLES = {
    "record_shapes": "NRL_TORCH_PROFILE_RECORD_SHAPES",
    "profile_memory": "NRL_TORCH_PROFILE_MEMORY",
    "with_stack": "NRL_TORCH_PROFILE_WITH_STACK",
    "with_flops": "NRL_TORCH_PROFILE_WITH_FLOPS",
    "gzip": "NRL_TORCH_PROFILE_GZIP",
}


def is_configured(environ: Mapping[str, str]) -> bool:
    return any(environ.get(name, "").strip() for name in SELECTING_VARIABLES)


def parse_patterns(text: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in text.split(",") if p.strip())


def parse_ranks(text: str, variable: str) -> frozenset[int] | None:
    value = text.strip()
    if value.lower() == "all":
        return None
    ranks = set()
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        if not item.isdigit():
            raise ConfigError(variable, text, RANKS_FORM, f"{item!r} is not a rank")
        ranks.add(int(item))
    if not ranks:
        raise ConfigError(variable, text, RANKS_FORM, "no rank given")
    return frozenset(ranks)


def parse_bool(text: str, variable: str) -> bool:
    try:
        return BOOL_WORDS[text.strip().lower()]
    except KeyError:
        raise ConfigError(variable, text, "one of 1/0, true/false, yes/no, on/off") from None


def parse_json_object(text: str, variable: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError(
            variable, text, 'a JSON object such as \'{"t": "cuda,nvtx,osrt"}\'', f"not JSON ({err.msg})"
        ) from None
    if not isinstance(value, dict):
        raise ConfigError(variable, text, 'a JSON object such as \'{"t": "cuda,nvtx,osrt"}\'', "not an object")
    return value


def _selection(environ: Mapping[str, str], prefix: str, step_variable: str, *, steps_required: bool):
    patterns_variable = f"{prefix}_WORKER_PATTERNS"
    patterns = parse_patterns(environ.get(patterns_variable, ""))
    step_text = environ.get(step_variable, "")
    steps = parse_step_spec(step_text, step_variable) if step_text.strip() else None
    if patterns and steps is None and steps_required:
        raise ConfigError(step_variable, step_text, f"a step range such as '3:5' because {patterns_variable} is set")
    if steps is not None and not patterns:
        raise ConfigError(
            patterns_variable,
            environ.get(patterns_variable, ""),
            f"comma-separated worker patterns such as '*policy*' because {step_variable} is set",
        )
    if not patterns:
        return None
    ranks_variable = f"{prefix}_RANKS"
    ranks = parse_ranks(environ[ranks_variable], ranks_variable) if environ.get(ranks_variable, "").strip() else None
    methods = parse_patterns(environ.get(f"{prefix}_DISCRETE_METHODS", ""))
    discrete_variable = f"{prefix}_DISCRETE"
    discrete = bool(methods) or (
        parse_bool(environ[discrete_variable], discrete_variable)
        if environ.get(discrete_variable, "").strip()
        else False
    )
    return tuple(Target(p, ranks, discrete, methods) for p in patterns), steps


def nsys_from_env(environ: Mapping[str, str]) -> BackendPlan | None:
    selected = _selection(environ, "NRL_NSYS", "NRL_NSYS_PROFILE_STEP_RANGE", steps_required=True)
    if selected is None:
        return None
    targets, steps = selected
    extra_text = environ.get("NRL_NSYS_EXTRA_OPTIONS", "")
    extra = parse_json_object(extra_text, "NRL_NSYS_EXTRA_OPTIONS") if extra_text.strip() else {}
    defaults = nsys_default_options(steps)
    if any(t.discrete for t in targets) and steps is not None:
        defaults["capture-range-end"] = "repeat"  # one report per captured call, however many
    options = merge_options(defaults, normalise_options(extra, "NRL_NSYS_EXTRA_OPTIONS"))
    return BackendPlan(NSYS, targets, steps, options=tuple(options.items()))


def torch_from_env(environ: Mapping[str, str]) -> BackendPlan | None:
    selected = _selection(environ, "NRL_TORCH_PROFILE", "NRL_TORCH_PROFILE_STEP_RANGE", steps_required=True)
    if selected is None:
        return None
    targets, steps = selected
    return BackendPlan(TORCH, targets, steps)


def rocprof_from_env(environ: Mapping[str, str]) -> BackendPlan | None:
    selected = _selection(environ, "NRL_ROCPROF", "NRL_ROCPROF_PROFILE_STEP_RANGE", steps_required=False)
    if selected is None:
        return None
    targets, steps = selected
    args_text = environ.get("NRL_ROCPROF_ARGS", "")
    args = parse_json_object(args_text, "NRL_ROCPROF_ARGS") if args_text.strip() else {}
    env_text = environ.get("NRL_ROCPROF_ENV", "")
    env = parse_json_object(env_text, "NRL_ROCPROF_ENV") if env_text.strip() else {}
    output_dir = environ.get("NRL_ROCPROF_OUTPUT_DIR", "").strip() or None
    return BackendPlan(
        ROCPROF,
        targets,
        steps,
        options=tuple((k, v) for k, v in normalise_options(args, "NRL_ROCPROF_ARGS").items() if v is not None),
        env=tuple((str(k), str(v)) for k, v in env.items()),
        output_dir=output_dir,
    )


def torch_settings_from_env(environ: Mapping[str, str], base: TorchSettings) -> TorchSettings:
    values = dict(base.__dict__)
    directory = environ.get(TORCH_DIR_VARIABLE, "").strip()
    if directory:
        values["directory"] = directory
    for field_name, variable in TORCH_FLAG_VARIABLES.items():
        if environ.get(variable, "").strip():
            values[field_name] = parse_bool(environ[variable], variable)
    return TorchSettings(**values)


def _log_level(environ: Mapping[str, str], default: str) -> str:
    level = environ.get(LOG_LEVEL_VARIABLE, "").strip().upper() or default
    if level not in LOG_LEVELS:
        raise ConfigError(LOG_LEVEL_VARIABLE, environ[LOG_LEVEL_VARIABLE], "one of " + ", ".join(LOG_LEVELS))
    return level


def _timeout(environ: Mapping[str, str], default: float) -> float:
    text = environ.get(TIMEOUT_VARIABLE, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ConfigError(TIMEOUT_VARIABLE, text, "a number of seconds > 0")
    return value


def plan_from_env(environ: Mapping[str, str], base: Plan | None = None) -> Plan:
    """The plan the variables describe; a backend the variables name replaces the base's one."""
    plan = base or Plan()
    sources = list(plan.sources)
    for backend in (nsys_from_env(environ), torch_from_env(environ), rocprof_from_env(environ)):
        if backend is not None:
            plan = plan.with_backend(backend)
            sources.append(f"env:{backend.kind}")
    return Plan(
        backends=plan.backends,
        torch=torch_settings_from_env(environ, plan.torch),
        log_level=_log_level(environ, plan.log_level),
        timeout_s=_timeout(environ, plan.timeout_s or DEFAULT_TIMEOUT_S),
        sources=tuple(sources),
    )


def load_plan(environ: Mapping[str, str]) -> Plan:
    """The file named by NRL_PROFILE_CONFIG (if any), with the variables over it."""
    base = None
    if environ.get(CONFIG_FILE_VARIABLE, "").strip():
        from nrlprof.config.yaml_config import plan_from_file

        base = plan_from_file(environ[CONFIG_FILE_VARIABLE].strip())
    return plan_from_env(environ, base)


__all__ = ["StepSelection", "is_configured", "load_plan", "plan_from_env"]
