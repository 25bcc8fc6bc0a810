"""One codec for everything that crosses a process: frozen dataclasses to JSON and back, checked.

`encode(value)` writes a dataclass (fields by name), an enum (its value), tuples, lists and sets (as lists) and
dicts; `decode(text, type)` reads it back as that type: a field the type does not have, one missing that has no
default, or a value of another type raises WireError (a ValueError) that names where. The messages themselves are
declared where they belong: the plan (`config.plan.Plan`), the worker descriptor (`launch.runtime_env`), the on-demand
request, card and answers (`config.requests`), the children's messages (`runtime.children.protocol`) and the manifest
line (`manifest.WindowRecord`). Standard library only: a worker's interpreter may have nothing but Ray and torch.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from enum import Enum
from functools import cache
from typing import Any, TypeVar

T = TypeVar("T")


class WireError(ValueError):
    """A message that is not the type it is read as."""


def to_builtins(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_builtins(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (tuple, list)):
        return [to_builtins(item) for item in value]
    if isinstance(value, (set, frozenset)):
        return sorted(to_builtins(item) for item in value)
    if isinstance(value, dict):
        return {key: to_builtins(item) for key, item in value.items()}
    return value


def encode(value: Any, sort_keys: bool = False) -> str:
    return json.dumps(to_builtins(value), separators=(",", ":"), sort_keys=sort_keys)


def decode(text: str | bytes, kind: type[T]) -> T:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as err:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise WireError(f"not JSON: {err}") from None
    return convert(data, kind)


def convert(data: Any, kind: Any, where: str = "") -> Any:
    """`data` (what `json.loads` gives) as a value of `kind`."""
    origin = typing.get_origin(kind)
    if kind is Any:
        return data
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(kind)
        if data is None and type(None) in args:
            return None
        for arg in args:
            if arg is not type(None):
                try:
                    return convert(data, arg, where)
                except WireError:
                    continue
        raise WireError(f"{where or 'the value'}: {data!r} is none of {kind}")
    if dataclasses.is_dataclass(kind):
        return _dataclass(data, kind, where)
    if origin in (tuple, list, frozenset, set):
        if not isinstance(data, list):
            raise WireError(f"{where or 'the value'}: {type(data).__name__}, not a list")
        args = typing.get_args(kind)
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(args) != len(data):
                raise WireError(f"{where or 'the value'}: {len(data)} items, not {len(args)}")
            return tuple(
                convert(item, arg, f"{where}[{i}]") for i, (item, arg) in enumerate(zip(data, args, strict=True))
            )
        items = [convert(item, args[0] if args else Any, f"{where}[{i}]") for i, item in enumerate(data)]
        return origin(items)
    if origin is dict:
        key_type, value_type = typing.get_args(kind) or (Any, Any)
        if not isinstance(data, dict):
            raise WireError(f"{where or 'the value'}: {type(data).__name__}, not an object")
        return {convert(k, key_type, where): convert(v, value_type, f"{where}.{k}") for k, v in data.items()}
    if isinstance(kind, type) and issubclass(kind, Enum):
        try:
            return kind(data)
        except ValueError:
            raise WireError(f"{where or 'the value'}: {data!r} is not a {kind.__name__}") from None
    if kind is float and isinstance(data, (int, float)) and not isinstance(data, bool):
        return float(data)
    if kind in (int, str, bool) and type(data) is kind:
        return data
    raise WireError(f"{where or 'the value'}: {data!r} is not {getattr(kind, '__name__', kind)}")


def _dataclass(data: Any, kind: type, where: str) -> Any:
    if not isinstance(data, dict):
        raise WireError(f"{where or kind.__name__}: {type(data).__name__}, not an object")
    hints, required = _fields(kind)
    unknown = data.keys() - hints.keys()
    if unknown:
        raise WireError(f"{where or kind.__name__}: no field {', '.join(sorted(unknown))}")
    missing = required - data.keys()
    if missing:
        raise WireError(f"{where or kind.__name__}: {', '.join(sorted(missing))} missing")
    return kind(**{name: convert(value, hints[name], f"{where}.{name}" if where else name)
                   for name, value in data.items()})  # fmt: skip


@cache
def _fields(kind: type) -> tuple[dict[str, Any], frozenset[str]]:
    """Each field's type (annotations resolved once per class), and the fields without a default."""
    hints = typing.get_type_hints(kind)
    fields = [f for f in dataclasses.fields(kind) if f.init]
    required = frozenset(f.name for f in fields if f.default is dataclasses.MISSING
                         and f.default_factory is dataclasses.MISSING)  # fmt: skip
    return {f.name: hints[f.name] for f in fields}, required
