"""nsys options: one builder for the NRL_* and YAML routes, and the option checks rocprof's args share.

Each window is one cudaProfilerStart/Stop range; what `--capture-range-end` does with K windows:
`stop` ends collecting after the first range and `stop-shutdown` (nsys's default) also ends the
process, so both keep only window 1; `repeat[:N]` makes each range its own report, N at most;
`repeat-shutdown:N` does the same, then ends the process; `none` keeps collecting after the first
range until the process exits (one report holding every window and the steps between).
An explicit end that keeps fewer than K ranges is an error. A null or absent end becomes `stop`
for one window, `repeat:K` for K windows, and `repeat` when a target is discrete (one capture per call).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from nrlprof.config.readers import key, names
from nrlprof.config.steps import StepSelection
from nrlprof.errors import ConfigError

NSYS_DEFAULT_TRACE = "cuda,nvtx"
OPTION_ALIASES = {"output": "o", "trace": "t"}
STOP_ON_RANGE_END = "stop-on-range-end"
OPTION_VALUE_FORM = "a string, finite number or boolean (null removes a default)"
OPTION_NAME_FORM = "a non-empty option name without spaces, '=' or NUL, such as 'trace' or 'cuda-memory-usage'"
CAPTURE_END_FORM = (
    "null (nrlprof computes it), 'none', 'stop', 'stop-shutdown', 'repeat', 'repeat:N' or 'repeat-shutdown:N'"
)
FLAGS_FORM = "a list of bare nsys flags such as [python-backtrace]"
MAX_OPTION_INT = 2**63 - 1
# nsys --capture-range-end values and how many capture ranges each lets through (None: no limit).
CAPTURE_ENDS_WITHOUT_COUNT = {"none": None, "stop": 1, "stop-shutdown": 1, "repeat": None}
CAPTURE_ENDS_WITH_COUNT = ("repeat", "repeat-shutdown")
# A worker armed for nsys on demand runs under `nsys launch --session-new=<session>` with these options; every other
# option goes to the `nsys start` of each window asked for (the collection's options).
SESSION_OPTION = "session-new"
LAUNCH_OPTIONS = ("t", SESSION_OPTION)
ARMED_SESSION = "<session>"


def option_text(value: object) -> str:
    """Booleans lower-cased, as nsys expects."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def option_words(options: Mapping[str, object]) -> list[str]:
    """`{"s": "none", "cuda-memory-usage": True}` -> `["-s", "none", "--cuda-memory-usage=true"]` (nsys words)."""
    words: list[str] = []
    for name, value in options.items():
        words += [f"--{name}={option_text(value)}"] if len(name) > 1 else [f"-{name}", option_text(value)]
    return words


def _check_option_value(value: object, where: str) -> None:
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, str):
        if "\0" in value:
            raise ConfigError(where, value, OPTION_VALUE_FORM, "contains a NUL character")
        return
    if isinstance(value, int):
        if abs(value) > MAX_OPTION_INT:
            raise ConfigError(
                where, f"a {value.bit_length()}-bit integer", OPTION_VALUE_FORM, "the number is too large"
            )
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigError(where, value, OPTION_VALUE_FORM, "not a finite number")
        return
    raise ConfigError(where, value, OPTION_VALUE_FORM)


def _option_name(raw_key: object, source: str) -> str:
    name = str(raw_key).lstrip("-")
    if not name or any(c.isspace() or c in "=\0" for c in name):
        raise ConfigError(key(source, str(raw_key)), raw_key, OPTION_NAME_FORM)
    return name


def normalise_options(options: Mapping[object, object], source: str) -> dict[str, str | None]:
    """Canonical keys (`output` -> `o`, `stop-on-range-end` -> `capture-range-end`); conflicts are errors."""
    normal: dict[str, str | None] = {}
    origin: dict[str, str] = {}
    for raw_key, value in options.items():
        name = _option_name(raw_key, source)
        where = key(source, str(raw_key))
        _check_option_value(value, where)
        canonical = OPTION_ALIASES.get(name, name)
        text = None if value is None else option_text(value)
        if name == STOP_ON_RANGE_END:
            canonical = "capture-range-end"
            if text is not None:
                text = "stop" if text.lower() == "true" else "none"
        if canonical in normal:
            raise ConfigError(
                where, value, f"only one of '{origin[canonical]}' and '{raw_key}'", "both name the same nsys option"
            )
        normal[canonical] = text
        origin[canonical] = str(raw_key)
    return normal


# nsys expands these in an output name to something of each process: its pid, or one of its variables (RANK).
PER_PROCESS_NAME_PARTS = ("%p", "%q{")


def _check_output_name(user: Mapping[object, object], source: str) -> None:
    """Every profiled worker of a node launched with one `-o` must write a name of its own."""
    for raw_key, value in user.items():
        name = str(raw_key).lstrip("-")
        if OPTION_ALIASES.get(name, name) != "o" or value is None:
            continue
        output = option_text(value)
        if not any(part in output for part in PER_PROCESS_NAME_PARTS):
            raise ConfigError(
                key(source, str(raw_key)),
                output,
                f"an output name with %p (the pid nsys launched) such as '{output}_%p'",
                "every profiled worker on a node would write this same file",
            )


def nsys_flags(value: object, path: str) -> tuple[str, ...]:
    """RLinf's bare flags, leading dashes dropped."""
    flags = tuple(flag.lstrip("-") for flag in names(value, path, FLAGS_FORM) or ())
    for flag in flags:
        _option_name(flag, path)
    return flags


def capture_range_end(steps: StepSelection) -> str:
    """`stop` for one window; `repeat:K` for K windows, so each window is its own finalised report."""
    count = len(steps.windows)
    return "stop" if count == 1 else f"repeat:{count}"


def captures_allowed(value: str, where: str) -> int | None:
    """How many capture ranges nsys records with this `--capture-range-end` (None: no limit)."""
    if value in CAPTURE_ENDS_WITHOUT_COUNT:
        return CAPTURE_ENDS_WITHOUT_COUNT[value]
    kind, colon, count = value.partition(":")
    well_formed = colon and kind in CAPTURE_ENDS_WITH_COUNT and count.isascii() and count.isdigit()
    if well_formed and len(count) <= 9 and int(count) >= 1:
        return int(count)
    raise ConfigError(where, value, CAPTURE_END_FORM)


def check_capture_range_end(value: str, steps: StepSelection, where: str) -> None:
    """An explicit end must let every window through: `stop` ends after one, `repeat:N` after N."""
    allowed = captures_allowed(value, where)
    windows = len(steps.windows)
    if allowed is not None and allowed < windows:
        raise ConfigError(
            where,
            value,
            f"null, 'repeat' or 'repeat:N' with N >= {windows}",
            f"the steps form {windows} windows and {value!r} ends capturing after {allowed}, "
            "so the later windows would silently be missing",
        )


def _checked_capture_range(
    options: dict[str, str | None], steps: StepSelection | None, source: str
) -> dict[str, str | None]:
    """User options with the capture range checked: it is nrlprof's, gated by the steps."""
    result = dict(options)
    if steps is None:
        for name in ("capture-range", "capture-range-end"):
            if result.get(name) is not None:
                raise ConfigError(
                    key(source, name),
                    result[name],
                    "no capture-range option while steps is null",
                    "with steps null the whole lifetime is profiled and nothing calls cudaProfilerStart; "
                    "set steps to capture chosen steps",
                )
        return result
    if "capture-range" in result:
        value = result.pop("capture-range")
        if value is None or value.lower() != "cudaprofilerapi":
            raise ConfigError(
                key(source, "capture-range"),
                value,
                "'cudaProfilerApi' (or leave it out)",
                "steps are gated with cudaProfilerStart/Stop, so the capture range is fixed",
            )
    end = result.get("capture-range-end")
    if end is None:
        result.pop("capture-range-end", None)
    else:
        check_capture_range_end(end, steps, key(source, "capture-range-end"))
    return result


def nsys_default_options(steps: StepSelection | None, *, discrete: bool = False) -> dict[str, str]:
    """The trace default; with steps, the cudaProfilerApi capture range and its end.

    Discrete targets capture each call as its own range, an unknown number per window: `repeat`.
    """
    options = {"t": NSYS_DEFAULT_TRACE}
    if steps is not None:
        options["capture-range"] = "cudaProfilerApi"
        options["capture-range-end"] = "repeat" if discrete else capture_range_end(steps)
    return options


def merge_options(base: Mapping[str, str], overrides: Mapping[str, str | None]) -> dict[str, str]:
    """The overrides over the base; an override of None removes the option."""
    return {name: value for name, value in {**base, **overrides}.items() if value is not None}


def build_nsys_options(
    user: Mapping[object, object],
    steps: StepSelection | None,
    source: str,
    *,
    discrete: bool = False,
    flags: tuple[str, ...] = (),
    flags_path: str = "flags",
) -> tuple[tuple[str, str], ...]:
    """User options over the defaults, validated the same way for every route; `source` names them in errors."""
    normal = normalise_options(user, source)
    for flag in flags:
        if OPTION_ALIASES.get(flag, flag) in normal:
            raise ConfigError(
                flags_path, list(flags), f"each nsys option in only one of 'flags' and 'options' ({flag!r} is in both)"
            )
    _check_output_name(user, source)
    overrides = _checked_capture_range(normal, steps, source)
    return tuple(merge_options(nsys_default_options(steps, discrete=discrete), overrides).items())


# More windows than this name the whole span in file names (`1-999`): one label per window would outgrow
# the 255-byte limit on a file name.
MAX_LABELLED_WINDOWS = 8


def steps_label(steps: StepSelection | None) -> str:
    if steps is None:
        return "all"
    windows = steps.windows
    if len(windows) > MAX_LABELLED_WINDOWS:
        return f"{windows[0].first}-{windows[-1].last}"
    return steps.label
