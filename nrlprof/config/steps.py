"""Step specifications: `3:5`, `5`, `1,2,5`, `3:5,10` -> windows of consecutive steps, kept as ranges."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass

from nrlprof.errors import ConfigError

STEP_SPEC_FORM = (
    "'start:stop' with 1 <= start < stop (stop exclusive), a single step 'N', "
    "or a comma list of both such as '1,2,5' or '3:5,10'"
)
MAX_STEP = 2**31 - 1
MAX_DIGITS = len(str(MAX_STEP))


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

    def __contains__(self, step: object) -> bool:
        return isinstance(step, int) and self.first <= step <= self.last


def merge_windows(spans: Iterable[tuple[int, int]]) -> tuple[Window, ...]:
    """Inclusive (first, last) spans -> sorted windows, overlapping and adjacent spans merged."""
    windows: list[Window] = []
    for first, last in sorted(spans):
        if windows and first <= windows[-1].last + 1:
            if last > windows[-1].last:
                windows[-1] = Window(windows[-1].first, last)
        else:
            windows.append(Window(first, last))
    return tuple(windows)


@dataclass(frozen=True)
class StepSelection:
    """The selected steps as sorted, non-adjacent windows; never materialised step by step."""

    windows: tuple[Window, ...]

    @classmethod
    def from_steps(cls, steps: Iterable[int]) -> StepSelection:
        return cls(merge_windows((step, step) for step in steps))

    @classmethod
    def from_spans(cls, spans: Iterable[tuple[int, int]]) -> StepSelection:
        """From inclusive (first, last) spans, merged into maximal windows."""
        return cls(merge_windows(spans))

    @property
    def step_count(self) -> int:
        return sum(w.last - w.first + 1 for w in self.windows)

    @property
    def label(self) -> str:
        return "_".join(w.label for w in self.windows)

    def window_of(self, step: int) -> Window | None:
        index = bisect_right(self.windows, step, key=lambda w: w.first) - 1
        if index >= 0 and step <= self.windows[index].last:
            return self.windows[index]
        return None

    def __contains__(self, step: object) -> bool:
        return isinstance(step, int) and self.window_of(step) is not None


def _parse_int(text: str, variable: str, spec: str, maximum: int = MAX_STEP) -> int:
    digits = text.strip()
    sign, body = (digits[0], digits[1:]) if digits[:1] in ("+", "-") else ("", digits)
    if not (body.isascii() and body.isdigit()):
        raise ConfigError(variable, spec, STEP_SPEC_FORM, f"{digits!r} is not an integer{_dash_hint(digits)}")
    magnitude = body.lstrip("0") or "0"
    if len(magnitude) > MAX_DIGITS or int(sign + magnitude) > maximum:
        shown = digits if len(digits) <= 20 else digits[:20] + "..."
        raise ConfigError(variable, spec, STEP_SPEC_FORM, f"{shown} is above {maximum}")
    return int(sign + magnitude)


def _dash_hint(item: str) -> str:
    """`3-5` (steps 3 to 5, as people write them) is `3:6` here: stop is exclusive."""
    first, dash, last = item.strip().partition("-")
    if dash and first.isdigit() and last.isdigit() and int(first) <= int(last):
        return f" (steps {first} to {last} are '{first}:{int(last) + 1}': the stop is exclusive)"
    return ""


def parse_step_spec(spec: str, variable: str) -> StepSelection:
    """Parse a step specification; `variable` names the input in errors."""
    spans: list[tuple[int, int]] = []
    items = [item for item in spec.split(",") if item.strip()]
    if not items:
        raise ConfigError(variable, spec, STEP_SPEC_FORM, "no steps given")
    for item in items:
        parts = item.split(":")
        if len(parts) == 1:
            step = _parse_int(parts[0], variable, spec)
            if step < 1:
                raise ConfigError(variable, spec, STEP_SPEC_FORM, f"step {step} is below 1 (steps are 1-indexed)")
            spans.append((step, step))
            continue
        if len(parts) != 2:
            raise ConfigError(variable, spec, STEP_SPEC_FORM, f"{item.strip()!r} has more than one ':'")
        start = _parse_int(parts[0], variable, spec)
        stop = _parse_int(parts[1], variable, spec, MAX_STEP + 1)
        if start < 1:
            raise ConfigError(variable, spec, STEP_SPEC_FORM, f"start {start} is below 1 (steps are 1-indexed)")
        if stop <= start:
            raise ConfigError(variable, spec, STEP_SPEC_FORM, f"range {start}:{stop} is empty (stop is exclusive)")
        spans.append((start, stop - 1))
    return StepSelection.from_spans(spans)


def steps_from_list(values: object, key: str, first: int = 1) -> StepSelection:
    """Steps from a YAML list such as verl's `profile_steps: [1, 2, 5]`; `first`: the framework's first step
    number (1; RLinf's lists count from 0)."""
    if isinstance(values, str):
        return parse_step_spec(values, key)
    form = f"a non-empty list of step numbers >= {first} (at most {MAX_STEP}), or null"
    if not isinstance(values, (list, tuple)) or not values:
        raise ConfigError(key, values, form)
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int) or not first <= value <= MAX_STEP:
            raise ConfigError(key, values, form, f"{value!r} is not a step")
    return StepSelection.from_steps(values)
