"""Windows that open themselves when a step is slow: `NRL_<backend>_STEP_RANGE=slow` (a window at the next step) or
`slow:keep` (every step recorded, the slow steps' traces kept), and NRL_PROFILE_SLOW_STEPS, _FACTOR and _MAX.
What counts as slow, and the spacing between triggers: docs/design.md, "Windows that open themselves"."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from nrlprof.config.variables import SLOW_FACTOR_VARIABLE, SLOW_MAX_VARIABLE, SLOW_STEPS_VARIABLE, SLOW_VARIABLES
from nrlprof.errors import ConfigError

# The STEP_RANGE values, and a backend's mode (BackendPlan.slow) for each.
SLOW_TEXT = "slow"
KEEP_TEXT = "slow:keep"
WINDOW = "window"
KEEP = "keep"
MODES = {SLOW_TEXT: WINDOW, KEEP_TEXT: KEEP}

# The median a step is judged against: up to HISTORY steps before it, and no verdict before MIN_HISTORY; after a
# trigger, QUIET_STEPS steps enter it with no verdict (nrlprof.runtime.slow.verdict).
HISTORY = 20
MIN_HISTORY = 5
QUIET_STEPS = HISTORY // 2
DEFAULT_FACTOR = 1.5
DEFAULT_STEPS = 1
DEFAULT_MAX = 3
MAX_FACTOR = 1e6
MAX_COUNT = 100_000
FACTOR_FORM = "a number > 1 such as 1.5 (a step this many times the median of the steps before it is slow)"
STEPS_FORM = f"a whole number of steps from 1 to {MAX_COUNT}, such as 1"
MAX_FORM = f"a whole number from 1 to {MAX_COUNT}: the windows or kept steps of a run, such as 3"


@dataclass(frozen=True)
class SlowSettings:
    """What counts as slow (`factor` times the median of the steps before), how many steps a window opened for a slow
    step covers (`steps`), and how many windows or kept steps a run may have (`max_triggers`)."""

    factor: float = DEFAULT_FACTOR
    steps: int = DEFAULT_STEPS
    max_triggers: int = DEFAULT_MAX


def slow_mode(text: str) -> str | None:
    """WINDOW or KEEP for a STEP_RANGE value that arms a backend for slow steps; None for any other value."""
    return MODES.get(text.strip().lower())


def parse_factor(text: str, variable: str = SLOW_FACTOR_VARIABLE) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(variable, text[:200], FACTOR_FORM, "not a number") from None
    if not math.isfinite(value) or value <= 1 or value > MAX_FACTOR:
        detail = "1 or less: every step would be slow" if value <= 1 else "not a finite number up to 1e6"
        raise ConfigError(variable, text[:200], FACTOR_FORM, detail)
    return value


def parse_count(text: str, variable: str, form: str) -> int:
    value = text.strip()
    digits = value[1:] if value[:1] in "+-" else value
    if not (digits.isascii() and digits.isdigit()) or len(digits) > len(str(MAX_COUNT)):
        raise ConfigError(variable, text[:200], form, "not a whole number")
    count = int(value)
    if not 1 <= count <= MAX_COUNT:
        raise ConfigError(variable, text[:200], form, "below 1" if count < 1 else f"above {MAX_COUNT}")
    return count


def slow_settings_from_env(environ: Mapping[str, str], armed: bool) -> SlowSettings | None:
    """The settings of a job with a backend armed for slow steps (`armed`); a setting without one is refused."""
    given = {name: environ[name] for name in SLOW_VARIABLES if (environ.get(name) or "").strip()}
    if not armed:
        for name, text in given.items():
            raise ConfigError(
                name,
                text,
                f"unset, or a backend armed for slow steps beside it: "
                f"NRL_TORCH_PROFILE_STEP_RANGE={SLOW_TEXT} (or {KEEP_TEXT}), "
                f"NRL_MEMORY_PROFILE_STEP_RANGE or NRL_NSYS_PROFILE_STEP_RANGE",
            )
        return None
    factor = parse_factor(given[SLOW_FACTOR_VARIABLE]) if SLOW_FACTOR_VARIABLE in given else DEFAULT_FACTOR
    steps = DEFAULT_STEPS
    if SLOW_STEPS_VARIABLE in given:
        steps = parse_count(given[SLOW_STEPS_VARIABLE], SLOW_STEPS_VARIABLE, STEPS_FORM)
    most = DEFAULT_MAX
    if SLOW_MAX_VARIABLE in given:
        most = parse_count(given[SLOW_MAX_VARIABLE], SLOW_MAX_VARIABLE, MAX_FORM)
    return SlowSettings(factor, steps, most)
