"""Profiler backends: one module each, sharing the interface in `base`."""

from __future__ import annotations

from nrlprof.backends.base import Backend
from nrlprof.config.plan import MEMORY, NSYS, ROCPROF, TORCH


def backend_class(kind: str) -> type[Backend]:
    if kind == NSYS:
        from nrlprof.backends.nsys import NsysBackend

        return NsysBackend
    if kind == TORCH:
        from nrlprof.backends.torch_profiler import TorchBackend

        return TorchBackend
    if kind == ROCPROF:
        from nrlprof.backends.rocprof import RocprofBackend

        return RocprofBackend
    if kind == MEMORY:
        from nrlprof.backends.memory import MemoryBackend

        return MemoryBackend
    raise KeyError(kind)
