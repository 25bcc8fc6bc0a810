"""Ray actors whose generation runs in processes they start, shaped like inference engines (no profiling code):
vLLM V1's EngineCore (a `multiprocessing` process), a `subprocess` engine, vLLM V2's EngineCore that creates its
tensor-parallel actors itself, and an engine with its own profiler switch (vLLM's `start_profile`)."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import subprocess
import sys

import ray

STOP = -1


def engine_range(name: str):
    """The engine's own NVTX range where the `nvtx` package is there (engines annotate their steps so)."""
    try:
        import nvtx
    except ImportError:
        return contextlib.nullcontext()
    return nvtx.annotate(name, domain="engine")


def generate(step: int) -> None:
    import torch

    name = f"engine.generate.{step}"
    with engine_range(name), torch.profiler.record_function(name):
        x = torch.ones(64, 64)
        for _ in range(3):
            x = torch.mm(x, x) / 64


def joined() -> dict:
    """Whether nrlprof joined this process to a worker's windows, and what it found in its environment."""
    nrlprof = sys.modules.get("nrlprof")
    return {
        "pid": os.getpid(),
        "joined": bool(nrlprof is not None and nrlprof.is_active()),
        "channel": "NRLPROF_CHANNEL" in os.environ,
        "nrlprof": getattr(nrlprof, "__file__", None),
    }


def configure_here() -> dict:
    """The engine's own code calling `nrlprof.configure` with verl's settings: which part this process has after it."""
    import nrlprof
    from nrlprof.process import state

    before = state.session
    roles = {"rollout": {"profiler": {"enable": True, "all_ranks": True}}}
    verl = {"trainer": {"profile_steps": [1]}, "global_profiler": {"tool": "torch"}, "actor_rollout_ref": roles}
    nrlprof.configure(verl)
    return {"kind": getattr(state.session, "kind", None), "same": state.session is before}


def engine_core(connection) -> None:
    """The engine's loop in its own process: one generation per request, until told to stop."""
    import torch  # noqa: F401  (imported before any window, as an engine does)

    while (request := connection.recv()) != STOP:
        if request in ("probe", "configure"):
            connection.send(joined() if request == "probe" else configure_here())
            continue
        generate(request)
        connection.send(os.getpid())


@ray.remote(num_cpus=0)
class VllmGenerationWorker:
    """vLLM V1's shape: the generation runs in an `EngineCore_0` process started with `start_method`."""

    def __init__(self, start_method: str = "spawn", engine_env: dict | None = None):
        context = multiprocessing.get_context(start_method)
        self.connection, theirs = context.Pipe()
        self.engine = context.Process(target=engine_core, args=(theirs,), name="EngineCore_0", daemon=True)
        os.environ.update(engine_env or {})  # the engine's own settings, as a launcher passes them
        try:
            self.engine.start()
        finally:
            for name in engine_env or {}:
                del os.environ[name]

    def generate(self, step: int) -> int:
        self.connection.send(step)
        return self.connection.recv()

    def probe(self, request: str = "probe") -> dict:
        self.connection.send(request)
        return self.connection.recv()

    def engine_pid(self) -> int:
        return self.engine.pid

    def pid(self) -> int:
        return os.getpid()


def subprocess_engine() -> None:
    """A `subprocess` engine's loop (`python engine_shapes.py`): one generation per step read from stdin, answered
    with its pid."""
    import torch  # noqa: F401  (imported before any window, as an engine does)

    for line in sys.stdin:
        generate(int(line))
        print(os.getpid(), flush=True)


@ray.remote(num_cpus=0)
class SglangGenerationWorker:
    """SGLang's shape: the engine is a `subprocess` running Python with the worker's environment."""

    def __init__(self):
        self.engine = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def generate(self, step: int) -> int:
        self.engine.stdin.write(f"{step}\n")
        self.engine.stdin.flush()
        return int(self.engine.stdout.readline())

    def engine_pid(self) -> int:
        return self.engine.pid


@ray.remote(num_cpus=0)
class RayWorkerProc:
    """vLLM V2's tensor-parallel worker, created by the EngineCore process."""

    def execute(self, step: int) -> int:
        import torch

        with torch.profiler.record_function(f"tp.execute.{step}"):
            torch.mm(torch.ones(32, 32), torch.ones(32, 32))
        return os.getpid()


def ray_engine_core(connection, tensor_parallel: int) -> None:
    """vLLM V2's EngineCore: it joins the cluster itself and creates its tensor-parallel actors."""
    ray.init(address="auto", logging_level="WARNING", log_to_driver=False)
    workers = [RayWorkerProc.remote() for _ in range(tensor_parallel)]
    connection.send(ray.get([w.execute.remote(0) for w in workers]))
    while (step := connection.recv()) != STOP:
        connection.send(ray.get([w.execute.remote(step) for w in workers]))


@ray.remote(num_cpus=0)
class VllmRayGenerationWorker:
    def __init__(self, tensor_parallel: int = 2):
        context = multiprocessing.get_context("spawn")
        self.connection, theirs = context.Pipe()
        self.engine = context.Process(target=ray_engine_core, args=(theirs, tensor_parallel), name="EngineCore_0")
        self.engine.start()
        self.worker_pids = self.connection.recv()

    def generate(self, step: int) -> list[int]:
        self.connection.send(step)
        return self.connection.recv()

    def tensor_parallel_pids(self) -> list[int]:
        return self.worker_pids


def profiled_engine_core(connection, trace_dir: str) -> None:
    """An engine process whose work only the engine's own torch profiler records, as vLLM's does."""
    import torch

    profiler = None
    while (request := connection.recv()) != STOP:
        if request == "start_profile":
            handler = torch.profiler.tensorboard_trace_handler(trace_dir, worker_name=f"engine_{os.getpid()}")
            profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], on_trace_ready=handler)
            profiler.start()
        elif request == "stop_profile":
            profiler.stop()
            profiler = None
        else:
            generate(request)
        connection.send(os.getpid())


class LLM:
    """A stand-in of vLLM's `LLM` (its package and profiler switch): the engine runs in a spawned process."""

    __module__ = "vllm.entrypoints.llm"

    def __init__(self):
        context = multiprocessing.get_context("spawn")
        self.connection, theirs = context.Pipe()
        trace_dir = os.environ["VLLM_TORCH_PROFILER_DIR"]
        self.engine = context.Process(target=profiled_engine_core, args=(theirs, trace_dir), name="EngineCore_0")
        self.engine.start()

    def _ask(self, request) -> int:
        self.connection.send(request)
        return self.connection.recv()

    def generate(self, step: int) -> int:
        return self._ask(step)

    def start_profile(self) -> None:
        self._ask("start_profile")

    def stop_profile(self) -> None:
        self._ask("stop_profile")


@ray.remote(num_cpus=0)
class ProfiledVllmWorker:
    """NeMo RL's shape: the engine is `self.llm`."""

    def __init__(self):
        self.llm = LLM()

    def generate(self, step: int) -> int:
        return self.llm.generate(step)

    def engine_pid(self) -> int:
        return self.llm.engine.pid


if __name__ == "__main__":
    subprocess_engine()
