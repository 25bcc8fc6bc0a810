"""The `nvtx` package, imported once on first use (None where it is not installed), and nrlprof's NVTX domain."""

from __future__ import annotations

from functools import cache
from types import ModuleType

DOMAIN = "nrlprof"


@cache
def nvtx_module() -> ModuleType | None:
    try:
        import nvtx
    except ImportError:
        return None
    return nvtx
