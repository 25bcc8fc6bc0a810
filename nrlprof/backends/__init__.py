"""Profiler backends: one module each, sharing the interface in `base`."""

from __future__ import annotations

import importlib

from nrlprof.backends.base import Backend
from nrlprof.config.plan import MEMORY, NSYS, ROCPROF, TORCH

# Each backend's module (imported when first used) and class.
BACKEND_CLASSES = {
    NSYS: ("nsys", "NsysBackend"),
    TORCH: ("torch_profiler", "TorchBackend"),
    ROCPROF: ("rocprof", "RocprofBackend"),
    MEMORY: ("memory", "MemoryBackend"),
}


def backend_class(kind: str) -> type[Backend]:
    module, name = BACKEND_CLASSES[kind]  # KeyError(kind) for a kind without a backend
    return getattr(importlib.import_module(f"nrlprof.backends.{module}"), name)
