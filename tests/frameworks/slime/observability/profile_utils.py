"""slime.observability.profile_utils: slime's own profiling switches, as slime's TrainProfiler acts on them.

`--use-pytorch-profiler` with `--profile-target train_overall`: one torch profiler per train actor, started when its
`init` ends, stepped once per `train_actor` (the actor role's training of a rollout; the critic's never steps) on
`schedule(wait=max(start - 1, 0), warmup=1 if start > 0 else 0, active=end - start, repeat=1)`, traces into
`--tensorboard-dir`. `train_actor` and `train_log_probs`: a profiler per call, stepped per micro-batch.
`--record-memory-history` with train_overall: CUDA memory history from the actor's init, dumped into
`--memory-snapshot-dir` at rollout `--memory-snapshot-num-steps - 1` (and on OOM).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import torch


class TrainProfiler:
    def __init__(self, args):
        self.args = args
        self._torch_profiler_overall = None
        self._memory_profiler_overall = None
        if args.use_pytorch_profiler and "train_overall" in args.profile_target:
            self._torch_profiler_overall = _create_torch_profiler(args, name="train_overall")
        if args.record_memory_history and "train_overall" in args.profile_target:
            self._memory_profiler_overall = _BaseMemoryProfiler.create(args)
            self._memory_profiler_overall.start()

    def on_init_end(self):
        if self._torch_profiler_overall is not None:
            self._torch_profiler_overall.start()

    def step(self, rollout_id: int):
        if self._torch_profiler_overall is not None:
            self._torch_profiler_overall.step()
        snapshot_steps = self.args.memory_snapshot_num_steps
        if (
            self._memory_profiler_overall is not None
            and snapshot_steps is not None
            and rollout_id == snapshot_steps - 1
        ):
            self._memory_profiler_overall.stop()

    def iterate_train_actor(self, iterator):
        return _profile_simple_loop(iterator, self.args, name="train_actor")

    def iterate_train_log_probs(self, iterator):
        return _profile_simple_loop(iterator, self.args, name="train_log_probs")


def _profile_simple_loop(iterator, args, name):
    if not (args.use_pytorch_profiler and name in args.profile_target):
        yield from iterator
        return
    torch_profiler = _create_torch_profiler(args, name=name)
    torch_profiler.start()
    for item in iterator:
        yield item
        torch_profiler.step()


def _create_torch_profiler(args, name):
    start, end = args.profile_step_start, args.profile_step_end
    return torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        schedule=torch.profiler.schedule(
            wait=max(start - 1, 0), warmup=1 if start > 0 else 0, active=end - start, repeat=1
        ),
        on_trace_ready=torch.profiler.tensorboard_trace_handler(
            args.tensorboard_dir, worker_name=f"{name}_rank_{torch.distributed.get_rank()}"
        ),
        record_shapes=True,
        with_stack=True,
        profile_memory=True,
        with_flops=True,
    )


class _BaseMemoryProfiler:
    @staticmethod
    def create(args):
        return {"torch": _TorchMemoryProfiler}[args.memory_recorder](args)

    def __init__(self, args):
        rank = torch.distributed.get_rank()
        self._path_dump = (
            Path(args.memory_snapshot_dir) / f"memory_snapshot_time{time.time()}_rank{rank}_{args.memory_snapshot_path}"
        )


class _TorchMemoryProfiler(_BaseMemoryProfiler):
    """slime records CUDA memory history; on CPU there is none, so the stand-in writes what it would dump."""

    def start(self):
        self._recording = True

    def stop(self):
        if getattr(self, "_recording", False):
            os.makedirs(self._path_dump.parent, exist_ok=True)
            self._path_dump.write_text("slime's snapshot")
            self._recording = False
