"""cudaProfilerStart/Stop for this process: the capture range nsys waits for."""

from __future__ import annotations

import ctypes
import ctypes.util
from functools import cache

from nrlprof.process.import_hooks import imported

CUDART_NAMES = ("libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0")
# cudaErrorInsufficientDriver, cudaErrorNoDevice: a CUDA runtime without a GPU behind it.
NO_DEVICE_CODES = (35, 100)


@cache
def _cudart() -> ctypes.CDLL | object | None:
    """torch's CUDA runtime where torch is loaded and sees a GPU; else the one the loader finds; else None.

    torch is not imported here: a process that has not imported it does not use CUDA through it.
    """
    torch = imported("torch")
    if torch is not None:
        try:
            if torch.cuda.is_available():
                return torch.cuda.cudart()
        except Exception:
            pass
    for name in (*CUDART_NAMES, ctypes.util.find_library("cudart")):
        if not name:
            continue
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


def _call(function_name: str) -> str | None:
    cudart = _cudart()
    if cudart is None:
        return "no CUDA runtime in this process"
    result = getattr(cudart, function_name)()
    code = int(result[0] if isinstance(result, tuple) else result)
    if code == 0:
        return None
    if code in NO_DEVICE_CODES:
        return f"no CUDA device here ({function_name} returned {code})"
    return f"{function_name} returned CUDA error {code}"


def start() -> str | None:
    """Start the capture range; the reason when it cannot, else None."""
    return _call("cudaProfilerStart")


def stop() -> str | None:
    """Stop the capture range; under nsys this blocks while nsys writes the report."""
    return _call("cudaProfilerStop")
