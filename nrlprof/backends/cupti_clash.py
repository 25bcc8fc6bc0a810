"""NVTX_INJECTION64_PATH pointing at libcupti (some images set it) makes Kineto's CUPTI subscription fail with
CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: torch traces then hold no GPU kernel. In a process that runs torch
windows nrlprof unsets it, as verl does for its torch profiler (NVTX reads it at its first call, after this), and
says so once; the processes it starts inherit the unset variable. Reversible like every patch."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping

from nrlprof.log import logger
from nrlprof.process import patches

NVTX_INJECTION_VARIABLE = "NVTX_INJECTION64_PATH"
PATCH_NAME = "os.environ[NVTX_INJECTION64_PATH] unset (torch's profiler needs CUPTI to itself)"
CLASH = (
    "NVTX_INJECTION64_PATH points at CUPTI ({path}): torch's profiler then records no GPU kernel "
    "(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)"
)


def points_at_cupti(value: str | None) -> bool:
    return bool(value) and "cupti" in os.path.basename(value.strip()).lower()


def cupti_injection(environ: Mapping[str, str]) -> str | None:
    """The CUPTI library NVTX_INJECTION64_PATH names in this environment, if it names one."""
    value = environ.get(NVTX_INJECTION_VARIABLE)
    return value if points_at_cupti(value) else None


def avoid_clash(worker_name: str, say: bool) -> bool:
    """Unset the variable in this process if it points at CUPTI; `say`: at INFO (else DEBUG). True if unset."""
    path = cupti_injection(os.environ)
    if path is None:
        return False
    patches.install_undoable(PATCH_NAME, lambda: _unset(path))
    text = CLASH.format(path=path) + f"; nrlprof unset it in {worker_name} (pid {os.getpid()}) for its torch windows"
    logger.log(logging.INFO if say else logging.DEBUG, "%s", text)
    return True


def _unset(path: str) -> Callable[[], None]:
    del os.environ[NVTX_INJECTION_VARIABLE]

    def restore() -> None:
        os.environ.setdefault(NVTX_INJECTION_VARIABLE, path)

    return restore
