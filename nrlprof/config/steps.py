"""Step specifications: `3:5`, `5`, `1,2,5`, `3:5,10` -> windows of consecutive steps."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from nrlprof.errors import ConfigError

STEP_SPEC_FORM = (
    "'start:stop' with 1 <= start < stop (stop exclusive), a single step 'N', "
    "or a comma list of both such as '1,2,5' or '3:5,10'"
)


@dataclass(frozen=True, order=True)
class Window:
    """A maximal run of consecutive selected steps; `last` is inclusive."""

    first: int
    last: int

    @property
    def steps(self) -> range:
        return range(self.first, self.last + 1)

    @property
    def label(self) -> str:
        """File-name friendly: no ':' or spaces."""
        return str(self.first) if self.first == self.last else f"{self.first}-{self.last}"


@dataclass(frozen=True)
class StepSelection:
    """The selected steps as sorted, non-adjacent windows."""

    windows: tuple[Window, ...]

    @classmethod
    def from_steps(cls, steps: Iterable[int]) -> StepSelection:
        windows: list[Window] = []
        for step in sorted(set(steps)):
            if windows and windows[-1].last + 1 == step:
                windows[-1] = Window(windows[-1].first, step)
            else:
                windows.append(Window(step, step))
        return cls(tuple(windows))

    @property
    def steps(self) -> tuple[int, ...]:
        return tuple(s for w in self.windows for s in w.steps)

    @property
    def label(self) -> str:
        return "_".join(w.label for w in self.windows)

    def window_of(self, step: int) -> Window | None:
        for window in self.windows:
            if window.first <= step <= window.last:
                return window
        return None

    def to_json(self) -> list[list[int]]:
        return [[w.first, w.last] for w in self.windows]

    @classmethod
    def from_json(cls, data: list[list[int]]) -> StepSelection:
        return cls(tuple(Window(int(a), int(b)) for a, b in data))


def _parse_int(text: str, variable: str, spec: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ConfigError(
            variable, spec, STEP_SPEC_FORM, f"Error parsing {variable}: {text.strip()!r} is not an integer"
        ) from None


def parse_step_spec(spec: str, variable: str) -> StepSelection:
    """Parse a step specification; `variable` names the input in errors."""
    steps: list[int] = []
    items = [item for item in spec.split(",") if item.strip()]
    if not items:
        raise ConfigError(variable, spec, STEP_SPEC_FORM, f"Error parsing {variable}: no steps given")
    for item in items:
        parts = item.split(":")
        if len(parts) == 1:
            step = _parse_int(parts[0], variable, spec)
            if step < 1:
                raise ConfigError(variable, spec, STEP_SPEC_FORM, f"step {step} is below 1 (steps are 1-indexed)")
            steps.append(step)
            continue
        if len(parts) != 2:
            raise ConfigError(
                variable, spec, STEP_SPEC_FORM, f"Error parsing {variable}: {item.strip()!r} has more than one ':'"
            )
        start = _parse_int(parts[0], variable, spec)
        stop = _parse_int(parts[1], variable, spec)
        if start < 1:
            raise ConfigError(variable, spec, STEP_SPEC_FORM, f"start {start} is below 1 (steps are 1-indexed)")
        if stop <= start:
            raise ConfigError(variable, spec, STEP_SPEC_FORM, f"range {start}:{stop} is empty (stop is exclusive)")
        steps.extend(range(start, stop))
    return StepSelection.from_steps(steps)


def steps_from_list(values: object, key: str) -> StepSelection:
    """Steps from a YAML list such as verl's `profile_steps: [1, 2, 5]`."""
    if isinstance(values, str):
        return parse_step_spec(values, key)
    if not isinstance(values, (list, tuple)) or not values:
        raise ConfigError(key, values, "a non-empty list of step numbers >= 1, or null")
    steps = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(key, values, "a non-empty list of step numbers >= 1, or null", f"{value!r} is not a step")
        steps.append(value)
    return StepSelection.from_steps(steps)
