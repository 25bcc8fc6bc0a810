"""Every monkeypatch nrlprof makes: named, keeping its original, reversible."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class Patch:
    name: str
    owner: Any
    attribute: str
    original: Any


_installed: dict[str, Patch] = {}


def install(name: str, owner: Any, attribute: str, make_replacement: Callable[[Any], Any]) -> None:
    """Replace `owner.attribute` by `make_replacement(original)`; installing twice is a no-op."""
    if name in _installed:
        return
    original = owner.__dict__[attribute] if attribute in vars(owner) else getattr(owner, attribute)
    setattr(owner, attribute, make_replacement(original))
    _installed[name] = Patch(name, owner, attribute, original)


def uninstall(name: str) -> None:
    patch = _installed.pop(name, None)
    if patch is not None:
        setattr(patch.owner, patch.attribute, patch.original)


def uninstall_all() -> None:
    for name in list(_installed):
        uninstall(name)


def installed() -> tuple[str, ...]:
    return tuple(_installed)
