"""Empty modules standing in for the GPU-only packages OpenRLHF imports at module level (deepspeed, flash_attn,
vllm): any submodule imports, and any name imported from one is a placeholder class. Nothing in the tests calls
into them; a call that did would get a placeholder back, never a result.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types


class Placeholder:
    def __init__(self, *args: object, **kwargs: object) -> None:
        pass


def _placeholder(name: str) -> type:
    if name.startswith("__"):
        raise AttributeError(name)
    return type(name, (Placeholder,), {})


class _Submodules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, package: str) -> None:
        self.package = package

    def find_spec(self, name: str, path: object, target: object = None) -> importlib.machinery.ModuleSpec | None:
        if name.startswith(self.package + "."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = types.ModuleType(spec.name)
        make_empty(module)
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def make_empty(module: types.ModuleType) -> None:
    module.__path__ = []
    module.__getattr__ = _placeholder  # type: ignore[method-assign]


def stand_in(package: str) -> None:
    make_empty(sys.modules[package])
    sys.meta_path.append(_Submodules(package))
