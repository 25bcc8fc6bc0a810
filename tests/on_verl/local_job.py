"""verl's worker groups on the shared cluster (RAY_ADDRESS), stepped by verl's trainer class:
`python local_job.py [--colocated] [--steps 5] [--profile-steps 2 3]` (the steps verl's own profiling is switched on
at)."""

from __future__ import annotations

import argparse

import ray
from verl_workers import bare_trainer, job_runtime_env, train, worker_groups

parser = argparse.ArgumentParser()
parser.add_argument("--colocated", action="store_true", help="the actor and the critic in one pool, fused")
parser.add_argument("--steps", type=int, default=5)
parser.add_argument("--profile-steps", type=int, nargs="*", default=[])
args = parser.parse_args()
ray.init(runtime_env=job_runtime_env())
groups = worker_groups(colocated=args.colocated, critic_ranks=1)
train(bare_trainer(groups), groups, steps=args.steps, profile_steps=tuple(args.profile_steps))
