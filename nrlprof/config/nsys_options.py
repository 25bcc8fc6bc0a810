"""nsys and rocprof-sys options: defaults, aliases, the capture-range end, output names."""

from __future__ import annotations

from collections.abc import Mapping

from nrlprof.config.steps import StepSelection
from nrlprof.errors import ConfigError

NSYS_DEFAULT_TRACE = "cuda,nvtx"
OPTION_ALIASES = {"output": "o", "trace": "t"}
OPTION_VALUE_FORM = "a string, number or boolean (null removes a default)"


def option_text(value: object) -> str:
    """Booleans lower-cased, as nsys expects."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def normalise_options(options: Mapping[str, object], source: str) -> dict[str, str | None]:
    """Canonical keys (`output` -> `o`, `stop-on-range-end` -> `capture-range-end`); conflicts are errors."""
    normal: dict[str, str | None] = {}
    origin: dict[str, str] = {}
    for raw_key, value in options.items():
        key = str(raw_key).lstrip("-")
        if value is not None and not isinstance(value, (str, int, float, bool)):
            raise ConfigError(f"{source}.{raw_key}", value, OPTION_VALUE_FORM)
        canonical = OPTION_ALIASES.get(key, key)
        text = None if value is None else option_text(value)
        if key == "stop-on-range-end":
            canonical = "capture-range-end"
            if text is not None:
                text = "stop" if text.lower() == "true" else "none"
        if canonical in normal:
            raise ConfigError(
                f"{source}.{raw_key}",
                value,
                f"only one of '{origin[canonical]}' and '{raw_key}'",
                "both name the same nsys option",
            )
        normal[canonical] = text
        origin[canonical] = str(raw_key)
    return normal


def capture_range_end(steps: StepSelection) -> str:
    """`stop` for one window; `repeat:K` for K windows, so each window is its own finalised report."""
    count = len(steps.windows)
    return "stop" if count == 1 else f"repeat:{count}"


def nsys_default_options(steps: StepSelection | None) -> dict[str, str]:
    options = {"t": NSYS_DEFAULT_TRACE}
    if steps is not None:
        options["capture-range"] = "cudaProfilerApi"
        options["capture-range-end"] = capture_range_end(steps)
    return options


def merge_options(base: Mapping[str, str], overrides: Mapping[str, str | None]) -> dict[str, str]:
    merged = dict(base)
    for key, value in overrides.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged


def steps_label(steps: StepSelection | None) -> str:
    return "all" if steps is None else steps.label


def nsys_output_name(worker_file_name: str, steps: StepSelection | None) -> str:
    """`<worker>_<steps>_%p`: no ':' or spaces; nsys replaces %p with the pid."""
    return f"{worker_file_name}_{steps_label(steps)}_%p"
