"""Run a function right after a module is imported, or now if it already is.

nrlprof's Ray hooks wait for `import ray` (activation at interpreter start-up imports nothing heavy), and
the framework adapters wait for the framework's own modules, so that they patch a module before any other
module takes names from it. Removing the hooks (`remove_all`) takes the finder off `sys.meta_path`.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

AfterImport = Callable[[ModuleType], None]


class _RunAfterExec(importlib.abc.Loader):
    """The module's own loader, then the functions waiting for it; the module keeps its own loader."""

    def __init__(self, loader: Any, name: str) -> None:
        self.loader = loader
        self.name = name

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        module.__loader__ = self.loader
        if module.__spec__ is not None:
            module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        _run_waiting(self.name, module)

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.loader, attribute)


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self) -> None:
        self._finding = threading.local()

    def find_spec(self, fullname: str, path, target=None):
        if fullname not in _waiting or getattr(self._finding, "name", None) == fullname:
            return None
        self._finding.name = fullname
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._finding.name = None
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        spec.loader = _RunAfterExec(spec.loader, fullname)
        return spec


_waiting: dict[str, list[tuple[str, AfterImport]]] = {}
_finder: _Finder | None = None
_lock = threading.RLock()


def when_imported(module_name: str, name: str, function: AfterImport) -> None:
    """Call `function(module)` once `module_name` is imported (now, if it is); `name` keeps it registered once."""
    global _finder
    with _lock:
        module = sys.modules.get(module_name)
        if module is not None and getattr(module, "__spec__", None) is not None and not _initialising(module):
            function(module)
            return
        entries = _waiting.setdefault(module_name, [])
        if any(existing == name for existing, _ in entries):
            return
        entries.append((name, function))
        if _finder is None:
            _finder = _Finder()
            sys.meta_path.insert(0, _finder)


def _initialising(module: ModuleType) -> bool:
    spec = module.__spec__
    return bool(getattr(spec, "_initializing", False))


def _run_waiting(module_name: str, module: ModuleType) -> None:
    with _lock:
        entries = _waiting.pop(module_name, [])
    for name, function in entries:
        try:
            function(module)
        except Exception as err:  # an adapter must never break the program's own import
            from nrlprof.log import logger

            logger.warning("nrlprof could not apply '%s' after importing %s: %s", name, module_name, err)


def waiting() -> tuple[str, ...]:
    """The modules something still waits for."""
    return tuple(_waiting)


def remove_all() -> None:
    global _finder
    with _lock:
        _waiting.clear()
        if _finder is not None:
            sys.meta_path[:] = [f for f in sys.meta_path if f is not _finder]
            _finder = None


def imported(module_name: str) -> ModuleType | None:
    """The module if this process imports it; while another thread is importing it, once that import is done.

    A thread that reads a module another thread is still initialising (a child's window action arriving while
    its engine imports torch) gets it half made, and can break that import; `import_module` waits for the
    module's import lock instead.
    """
    if module_name not in sys.modules:
        return None
    return importlib.import_module(module_name)


def imported_already(module_name: str) -> ModuleType | None:
    """The module if its import is complete; None while nothing or another thread is still importing it.

    For threads that only ask whether a module is in use (is Ray connected?) and must not wait on an import.
    """
    module = sys.modules.get(module_name)
    return None if module is None or _initialising(module) else module
