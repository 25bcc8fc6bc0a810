"""slime.utils.arguments.parse_args: the arguments the stand-in's loop and slime's profiling switches read, with
slime's (and Megatron's) names and defaults."""

from __future__ import annotations

import argparse


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add = parser.add_argument
    add("--num-rollout", type=int, default=4)
    add("--start-rollout-id", type=int, default=None)
    add("--actor-num-nodes", type=int, default=1)
    add("--actor-num-gpus-per-node", type=int, default=2)
    add("--critic-num-nodes", type=int, default=1)
    add("--critic-num-gpus-per-node", type=int, default=2)
    add("--use-critic", action="store_true", default=False)
    add("--num-critic-only-steps", type=int, default=0)
    add("--rollout-num-gpus", type=int, default=1)
    add("--rollout-num-gpus-per-engine", type=int, default=1)
    add("--eval-interval", type=int, default=None)
    add("--save-interval", type=int, default=None)
    add("--skip-eval-before-train", action="store_true", default=False)
    add("--offload-rollout", action="store_true", default=False)
    add("--offload-train", action="store_true", default=False)
    add("--release-train", action="store_true", default=False)
    add("--check-weight-update-equal", action="store_true", default=False)
    add("--rollout-global-dataset", action="store_true", default=False)
    # Megatron's profiling arguments, as slime's TrainProfiler reads them.
    add("--use-pytorch-profiler", action="store_true", default=False)
    add("--profile-step-start", type=int, default=10)
    add("--profile-step-end", type=int, default=12)
    add("--tensorboard-dir", type=str, default=None)
    add("--record-memory-history", action="store_true", default=False)
    add("--memory-snapshot-path", type=str, default="snapshot.pickle")
    # slime's own.
    add("--memory-snapshot-dir", type=str, default=".")
    add("--memory-snapshot-num-steps", type=int, default=None)
    add("--profile-target", type=str, choices=["train_overall", "train_actor", "train_log_probs"],
        default=["train_overall"], nargs="+")  # fmt: skip
    add("--memory-recorder", type=str, choices=["torch", "memray"], default="torch")
    args = parser.parse_args(argv)
    args.train_env_vars = {}
    return args
