"""A job that ends Ray or its workers while a window is open: its workers, its driver, and what it leaves.

The driver is a zero-code job (it never imports nrlprof; the start-up hook activates it) that joins a running
cluster by address, so its `ray.shutdown()` disconnects it alone, as the end of a real job does.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
from pathlib import Path

import ray

from helpers.environment import environment_without

TESTS_DIR = Path(__file__).resolve().parent.parent
WORKER = "ending_policy_worker"
ENGINE = "ending_generation_worker.engine_core_0"


@ray.remote(num_cpus=0)
class EndingPolicyWorker:
    """A policy worker whose train step grows its memory a little; `die_at`: the step it SIGKILLs itself at."""

    def __init__(self, die_at: int = 0):
        self.die_at = die_at
        self.kept: list[bytes] = []

    def train(self, step: int) -> int:
        import torch

        if step == self.die_at:
            os.kill(os.getpid(), signal.SIGKILL)
        with torch.profiler.record_function(f"policy.train.{step}"):
            x = torch.ones(64, 64)
            for _ in range(3):
                x = x @ x / 64
        self.kept.append(bytes(1 << 20))
        return os.getpid()

    def pid(self) -> int:
        return os.getpid()


@ray.remote(num_cpus=0)
class EndingGenerationWorker:
    """A generation worker with a spawned EngineCore process, which it ends itself (`end_engine`)."""

    def __init__(self):
        from engine_shapes import engine_core

        context = multiprocessing.get_context("spawn")
        self.connection, theirs = context.Pipe()
        self.engine = context.Process(target=engine_core, args=(theirs,), name="EngineCore_0", daemon=True)
        self.engine.start()

    def generate(self, step: int) -> int:
        self.connection.send(step)
        return self.connection.recv()

    def engine_pid(self) -> int:
        return self.engine.pid

    def end_engine(self) -> int:
        self.engine.terminate()
        self.engine.join(timeout=60)
        return self.engine.exitcode


def run_job(ray_module, tmp_path: Path, ending: str, last_step: int, **variables: str) -> tuple[str, list[int]]:
    """Run tests/programs/job_end_driver.py (`ending`: `shutdown`, `kill` rank 1 at step 3, `sigkill`: rank 1 dies
    at step 5); its stderr, and the pids of the driver and of ranks 0 and 1."""
    env = environment_without("NRL_", "NRLPROF_", "RAY_ADDRESS")
    env |= {
        "NRL_STEP_METHOD": "*policy*.train",
        "NRL_STEP_ANATOMY": "0",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS_DIR), env.get("PYTHONPATH")])),
        "RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "token"),
        **variables,
    }
    address = ray_module.get_runtime_context().gcs_address
    done = subprocess.run(
        [sys.executable, str(TESTS_DIR / "programs" / "job_end_driver.py"), address, ending, str(last_step)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    assert "DONE" in done.stdout, done.stdout
    (pids,) = [line.split()[1:] for line in done.stdout.splitlines() if line.startswith("PIDS")]
    return done.stderr, [int(p) for p in pids]


def session_dir(ray_module) -> Path:
    return Path(ray_module._private.worker.global_worker.node.get_session_dir_path())


def process_manifest(ray_module, pid: int) -> Path:
    """The manifest one process wrote in the cluster's session."""
    (path,) = (session_dir(ray_module) / "logs" / "nrlprof").glob(f"manifest-*-{pid}.jsonl")
    return path


def manifest_records(ray_module, pid: int) -> list[dict]:
    """The records one process wrote in the cluster's manifests."""
    lines = process_manifest(ray_module, pid).read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]
