"""A window's files finished beside the next step (nrlprof.process.finishing), as tests see them: a backend's window
stopped and finished in one process, and policy workers whose trace files take seconds to finish, in each actor
shape (plain, threaded, async)."""

from __future__ import annotations

import os
import time

import ray

from nrlprof.backends.base import Backend
from nrlprof.manifest import WindowRecord
from nrlprof.process.finishing import FINISHER


def stop_and_finish(backend: Backend) -> WindowRecord:
    """`stop_window`, then its files finished and its record completed, as the manifest will hold it."""
    record = backend.stop_window()
    completion = backend.completion()
    FINISHER.settle()
    return completion(record) if completion is not None else record


def finishing_pending(_actor: object) -> bool:
    """Run in an actor with `__ray_call__` (which settles nothing): whether its files are still being finished."""
    return FINISHER.pending


def _slow_finishing(finish_s: float) -> None:
    from nrlprof.backends import torch_profiler

    written = torch_profiler._write_valid

    def slowly_written(*args):
        time.sleep(finish_s)
        return written(*args)

    torch_profiler._write_valid = slowly_written


def _train(step: int) -> int:
    import torch

    with torch.profiler.record_function(f"policy.train.{step}"):
        torch.ones(32, 32) @ torch.ones(32, 32)
    return os.getpid()


@ray.remote(num_cpus=0)
class SlowFinishingPolicyWorker:
    """A policy worker whose torch traces take `finish_s` more to finish."""

    def __init__(self, finish_s: float) -> None:
        _slow_finishing(finish_s)

    def train(self, step: int) -> int:
        return _train(step)

    def pid(self) -> int:
        return os.getpid()


@ray.remote(num_cpus=0)
class AsyncSlowFinishingPolicyWorker:
    """The same, as an async actor."""

    def __init__(self, finish_s: float) -> None:
        _slow_finishing(finish_s)

    async def train(self, step: int) -> int:
        return _train(step)

    async def pid(self) -> int:
        return os.getpid()


def _failing_export() -> None:
    """Kineto's export fails (a full disk, say): nothing of the trace is written."""
    from nrlprof.backends import torch_profiler

    def failing(profiler, exported) -> None:
        raise OSError(28, "No space left on device (a test's stand-in)")

    torch_profiler._export = failing


@ray.remote(num_cpus=0)
class ExportFailingPolicyWorker:
    """A policy worker whose torch traces cannot be exported."""

    def __init__(self) -> None:
        _failing_export()

    def train(self, step: int) -> int:
        return _train(step)

    def pid(self) -> int:
        return os.getpid()
