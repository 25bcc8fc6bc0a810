"""Environment variables handed to a profiler (rocprof-sys): names and values a process can really receive."""

from __future__ import annotations

import math
from collections.abc import Mapping

from nrlprof.config.nsys.options import MAX_OPTION_INT, option_text
from nrlprof.errors import ConfigError

NAME_FORM = "a variable name without '=' or NUL, such as ROCPROFSYS_SAMPLING_FREQ"
VALUE_FORM = "a string, finite number or boolean without NUL"
MAPPING_FORM = 'a mapping of variable names to values, such as {"ROCPROFSYS_SAMPLING_FREQ": 100}'


def _value_text(item: object, where: str) -> str:
    if not isinstance(item, (str, int, float)):
        raise ConfigError(where, item, VALUE_FORM)
    if isinstance(item, float) and not math.isfinite(item):
        raise ConfigError(where, item, VALUE_FORM, "not a finite number")
    if isinstance(item, int) and not isinstance(item, bool) and abs(item) > MAX_OPTION_INT:
        raise ConfigError(where, f"a {item.bit_length()}-bit integer", VALUE_FORM, "the number is too large")
    text = option_text(item)
    if "\0" in text:
        raise ConfigError(where, item, VALUE_FORM, "contains a NUL character")
    return text


def environment_items(value: object, source: str) -> tuple[tuple[str, str], ...]:
    """A mapping of variable names to scalars -> (name, text) pairs; `source` names it in errors."""
    if value is None:
        return ()
    if not isinstance(value, Mapping):
        raise ConfigError(source, value, MAPPING_FORM)
    items = []
    for name, item in value.items():
        where = f"{source}.{name}"
        if not isinstance(name, str) or not name or "=" in name or "\0" in name:
            raise ConfigError(where, name, NAME_FORM)
        items.append((name, _value_text(item, where)))
    return tuple(items)
