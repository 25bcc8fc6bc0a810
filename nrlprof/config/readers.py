"""Typed readers for YAML mappings: every error names the full key path, unknown keys get a "did you mean"."""

from __future__ import annotations

import contextlib
import difflib
from collections.abc import Iterable, Iterator, Mapping
from contextvars import ContextVar

from nrlprof.config.plan import MAX_RANK
from nrlprof.config.steps import StepSelection, steps_from_list
from nrlprof.errors import ConfigError

BOOL_FORM = "true or false"
RANK_LIST_FORM = "a list of ranks >= 0 such as [0, 1] ([] selects no rank, null all ranks)"
NAMES_FORM = "a list of names such as [ActorGroup, RolloutGroup] (fnmatch patterns allowed)"
STEPS_FORM = "a list of step numbers >= 1 such as [1, 2, 5], or null"


def key(prefix: str, name: str) -> str:
    """`prefix.name`; a prefix ending in ':' (a file's root) is joined without a dot."""
    if not prefix:
        return name
    return prefix + name if prefix.endswith(":") else f"{prefix}.{name}"


def mapping(value: object, path: str) -> dict:
    """A mapping (null reads as empty)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(path, value, "a mapping")
    return dict(value)


# False while reading a framework's own config object (verl's, as its trainer holds it): its schema grows with
# each release, and nrlprof reads only the keys it uses. A YAML file a user wrote is read strictly.
_strict_keys: ContextVar[bool] = ContextVar("strict_keys", default=True)


@contextlib.contextmanager
def framework_keys() -> Iterator[None]:
    """Keys nrlprof does not use are ignored (the values of those it uses are still checked)."""
    token = _strict_keys.set(False)
    try:
        yield
    finally:
        _strict_keys.reset(token)


def check_keys(block: Mapping, allowed: Iterable[str], path: str) -> None:
    if not _strict_keys.get():
        return
    allowed = sorted(allowed)
    for name in block:
        if name in allowed:
            continue
        close = difflib.get_close_matches(str(name), allowed, n=1)
        hint = f"unknown key (did you mean {close[0]!r}?)" if close else "unknown key"
        raise ConfigError(key(path, str(name)), block[name], "one of " + ", ".join(allowed), hint)


def read_bool(block: Mapping, name: str, default: bool, path: str) -> bool:
    value = block.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ConfigError(key(path, name), value, BOOL_FORM)
    return value


def optional_bool(block: Mapping, name: str, path: str) -> bool | None:
    return read_bool(block, name, False, path) if block.get(name) is not None else None


def optional_str(block: Mapping, name: str, path: str) -> str | None:
    value = block.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or "\0" in value:
        raise ConfigError(key(path, name), value, "a non-empty string without NUL, or null")
    return value.strip()


def rank_list(value: object, path: str) -> frozenset[int] | None:
    """null: all ranks; a list: those ranks ([] selects none)."""
    if value is None:
        return None
    if not isinstance(value, (list, tuple)):
        raise ConfigError(path, value, RANK_LIST_FORM)
    for rank in value:
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank <= MAX_RANK:
            raise ConfigError(path, value, RANK_LIST_FORM, f"{rank!r} is not a rank")
    return frozenset(value)


def names(value: object, path: str, form: str = NAMES_FORM) -> tuple[str, ...] | None:
    """A list of non-empty strings, each stripped; null stays None."""
    if value is None:
        return None
    if not isinstance(value, (list, tuple)):
        raise ConfigError(path, value, form)
    for name in value:
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(path, value, form, f"{name!r} is not a name")
    return tuple(name.strip() for name in value)


def step_list(value: object, path: str, first: int = 1) -> StepSelection | None:
    """`first`: the framework's first step number (RLinf counts from 0)."""
    if value is None:
        return None
    if not isinstance(value, (list, tuple, str)):
        raise ConfigError(path, value, STEPS_FORM)
    return steps_from_list(value, path, first)


def lookup(config: Mapping, dotted: str) -> tuple[bool, object]:
    """(found, value) at a dotted key path."""
    node: object = config
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node


def as_mapping(config: object, source: str) -> dict:
    """A dict, or an OmegaConf DictConfig resolved to one."""
    if type(config).__module__.startswith("omegaconf"):
        from omegaconf import OmegaConf
        from omegaconf.errors import OmegaConfBaseException

        try:
            config = OmegaConf.to_container(config, resolve=True)
        except OmegaConfBaseException as err:
            raise ConfigError(
                source, type(config).__name__, "a config whose interpolations resolve", str(err)
            ) from None
    if not isinstance(config, Mapping):
        raise ConfigError(source, config, "a mapping (a dict or an OmegaConf DictConfig)")
    return dict(config)
