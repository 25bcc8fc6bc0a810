"""Listing nrlprof's agent hook in `RAY_RUNTIME_ENV_PLUGINS` (merged with plugins already there)."""

from __future__ import annotations

import json
from collections.abc import MutableMapping

from nrlprof.errors import ConfigError
from nrlprof.rayfix.names import HOOK_CLASS_PATH, PLUGINS_VARIABLE

__all__ = ["HOOK_CLASS_PATH", "PLUGINS_VARIABLE", "agent_hook_listed", "install_agent_hook", "with_agent_hook"]


def with_agent_hook(current: str | None) -> str:
    """The variable's value with the hook added once; other plugins are kept in order."""
    plugins: list = []
    if current and current.strip():
        try:
            plugins = json.loads(current)
        except json.JSONDecodeError as err:
            raise ConfigError(PLUGINS_VARIABLE, current, "a JSON list of plugin objects", str(err)) from None
        if not isinstance(plugins, list):
            raise ConfigError(PLUGINS_VARIABLE, current, "a JSON list of plugin objects")
    if not any(isinstance(p, dict) and p.get("class") == HOOK_CLASS_PATH for p in plugins):
        plugins.append({"class": HOOK_CLASS_PATH})
    return json.dumps(plugins)


def install_agent_hook(environ: MutableMapping[str, str]) -> None:
    environ[PLUGINS_VARIABLE] = with_agent_hook(environ.get(PLUGINS_VARIABLE))


def agent_hook_listed(value: str | None) -> bool:
    try:
        plugins = json.loads(value or "[]")
    except json.JSONDecodeError:
        return False
    return isinstance(plugins, list) and any(isinstance(p, dict) and p.get("class") == HOOK_CLASS_PATH for p in plugins)
