"""cudaProfilerStart/Stop for this process: the capture range nsys waits for."""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from functools import cache

CUDART_NAMES = ("libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0")


@cache
def _cudart() -> ctypes.CDLL | None:
    """torch's cudart when torch sees a GPU, else the system libcudart, else None."""
    torch = sys.modules.get("torch")
    if torch is None:
        try:
            import torch
        except ImportError:
            torch = None
    if torch is not None:
        try:
            if torch.cuda.is_available():
                return torch.cuda.cudart()
        except Exception:
            return None
        return None
    for name in (*CUDART_NAMES, ctypes.util.find_library("cudart")):
        if not name:
            continue
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


def available() -> bool:
    return _cudart() is not None


def _call(function_name: str) -> str | None:
    cudart = _cudart()
    if cudart is None:
        return "CUDA is not available in this process"
    result = getattr(cudart, function_name)()
    code = int(result[0] if isinstance(result, tuple) else result)
    return None if code == 0 else f"{function_name} returned CUDA error {code}"


def start() -> str | None:
    """Start the capture range; the reason when it cannot, else None."""
    return _call("cudaProfilerStart")


def stop() -> str | None:
    return _call("cudaProfilerStop")
