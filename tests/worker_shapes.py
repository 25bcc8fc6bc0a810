"""Ray actors shaped like real RL workers (no profiling code in them): threaded, async, compiled-graph,
an engine that creates its own tensor-parallel actors, and one that stays busy across a window."""

from __future__ import annotations

import asyncio
import os
import threading
import time

import ray


def matmuls(tag: str) -> None:
    import torch

    with torch.profiler.record_function(tag):
        x = torch.ones(48, 48)
        for _ in range(3):
            x = x @ x / 48


@ray.remote(num_cpus=0, max_concurrency=4)
class ThreadedRolloutWorker:
    """Methods run on a pool of threads, and hand the work to a thread of their own (a rollout loop)."""

    def __init__(self):
        from concurrent.futures import ThreadPoolExecutor

        self.loop = ThreadPoolExecutor(1, thread_name_prefix="rollout")

    def rollout(self, step: int) -> int:
        return self.loop.submit(lambda: matmuls(f"threaded.rollout.{step}") or threading.get_ident()).result()

    def pid(self) -> int:
        return os.getpid()


@ray.remote(num_cpus=0)
class AsyncRewardWorker:
    """An async actor: methods run as tasks of the actor's event loop thread."""

    async def score(self, step: int) -> int:
        await asyncio.sleep(0)
        matmuls(f"async.score.{step}")
        return threading.get_ident()

    async def pid(self) -> int:
        return os.getpid()


@ray.remote(num_cpus=0)
class CompiledGraphWorker:
    """Driven by a Ray compiled graph, as vLLM's Ray executor drives its tensor-parallel workers."""

    def forward(self, step: int) -> int:
        matmuls(f"compiled.forward.{step}")
        return step

    def pid(self) -> int:
        return os.getpid()


@ray.remote(num_cpus=0)
class RayWorkerWrapper:
    """vLLM's tensor-parallel worker class name."""

    def execute(self, step: int) -> int:
        matmuls(f"tp.execute.{step}")
        return os.getpid()


@ray.remote(num_cpus=0)
class VllmGenerationWorker:
    """An engine that creates its own tensor-parallel actors, as vLLM's Ray executor does."""

    def __init__(self, tensor_parallel: int = 2):
        self.children = [RayWorkerWrapper.remote() for _ in range(tensor_parallel)]

    def generate(self, step: int) -> list[int]:
        matmuls(f"engine.generate.{step}")
        return ray.get([c.execute.remote(step) for c in self.children])

    def pid(self) -> int:
        return os.getpid()


@ray.remote(num_cpus=0)
class BusyWorker:
    """One long call holds the actor, so window actions queue behind it."""

    def busy_until(self, released: str, limit_s: float) -> float:
        """Busy until the file `released` exists (at most `limit_s`); how long it was."""
        began = time.monotonic()
        while not os.path.exists(released) and time.monotonic() - began < limit_s:
            time.sleep(0.05)
        return time.monotonic() - began

    def pid(self) -> int:
        return os.getpid()


@ray.remote(num_cpus=0, max_concurrency=4)
class OverlappingGenerationWorker:
    """Calls of one method overlap in time (an engine serving several requests at once)."""

    def generate_sequences(self, step: int, hold_s: float) -> int:
        matmuls(f"overlap.generate.{step}")
        time.sleep(hold_s)
        return threading.get_ident()


@ray.remote(num_cpus=0)
class LeakyPolicyWorker:
    """Keeps 40 MB more every call (a cache nobody frees)."""

    def __init__(self):
        self.kept = []

    def train(self, step: int) -> int:
        self.kept.append(bytearray(40 << 20))
        for index in range(0, len(self.kept[-1]), 4096):
            self.kept[-1][index] = 1
        return os.getpid()


@ray.remote(num_cpus=0)
class SteadyPolicyWorker:
    def train(self, step: int) -> int:
        scratch = bytearray(40 << 20)
        for index in range(0, len(scratch), 4096):
            scratch[index] = 1
        return os.getpid()
