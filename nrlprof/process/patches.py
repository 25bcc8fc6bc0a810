"""Every monkeypatch nrlprof makes: named, keeping its original, reversible.

Most replace an attribute (`install`); a change made another way (an environment variable the process's
children inherit, a fork handler) is recorded with the function that reverts it (`install_undoable`).
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class Patch:
    name: str
    owner: Any
    attribute: str
    original: Any
    undo: Callable[[], None] | None = None


_installed: dict[str, Patch] = {}


def install(name: str, owner: Any, attribute: str, make_replacement: Callable[[Any], Any]) -> None:
    """Replace `owner.attribute` by `make_replacement(original)`; installing twice is a no-op."""
    if name in _installed:
        return
    original = owner.__dict__[attribute] if attribute in vars(owner) else getattr(owner, attribute)
    setattr(owner, attribute, make_replacement(original))
    _installed[name] = Patch(name, owner, attribute, original)


def install_with_copies(name: str, module: Any, attribute: str, make_replacement: Callable[[Any], Any]) -> None:
    """`install` on a module's function, and on each copy other loaded modules took with `from module import f`.

    A module imported before nrlprof was configured (a driver that imports the framework, then calls
    `nrlprof.configure`) may have taken the original by name; each such copy is replaced too, as its own patch.
    """
    if name in _installed:
        return
    original = getattr(module, attribute)
    install(name, module, attribute, make_replacement)
    replacement = getattr(module, attribute)
    for other_name, other in list(sys.modules.items()):
        if other is module or other is None:
            continue
        try:
            held = vars(other).get(attribute)
        except TypeError:
            continue
        if held is original:
            install(f"{name} in {other_name}", other, attribute, lambda _: replacement)


def install_finally(name: str, owner: Any, attribute: str, then: Callable[[], None]) -> None:
    """`install` of a method after which `then()` runs, however it ends (a coroutine's once it is awaited)."""

    def wrap(original):
        if inspect.iscoroutinefunction(original):

            @functools.wraps(original)
            async def awaited(*args, **kwargs):
                try:
                    return await original(*args, **kwargs)
                finally:
                    then()

            return awaited

        @functools.wraps(original)
        def called(*args, **kwargs):
            try:
                return original(*args, **kwargs)
            finally:
                then()

        return called

    install(name, owner, attribute, wrap)


def install_undoable(name: str, apply: Callable[[], Callable[[], None]]) -> None:
    """Run `apply()`, which makes a change and returns the function undoing it; installing twice is a no-op."""
    if name in _installed:
        return
    _installed[name] = Patch(name, None, "", None, apply())


def uninstall(name: str) -> None:
    patch = _installed.pop(name, None)
    if patch is None:
        return
    if patch.undo is not None:
        patch.undo()
    else:
        setattr(patch.owner, patch.attribute, patch.original)


def uninstall_all(keep: tuple[str, ...] = ()) -> None:
    """Last installed first: a patch of an attribute another patch replaced puts back that patch's replacement, which
    then puts back the original (slime's step hook and the step marker's both wrap `ActorMethod._remote`)."""
    for name in reversed(list(_installed)):
        if name not in keep:
            uninstall(name)


def installed() -> tuple[str, ...]:
    return tuple(_installed)
