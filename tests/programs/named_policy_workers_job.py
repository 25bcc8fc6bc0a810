"""A plain Ray job, no framework: two PolicyWorker actors named `policy-0` and `policy-1`, stepped 4 times by
`nrlprof.step`; prints DONE at the end (`python named_policy_workers_job.py <cluster address>`)."""

from __future__ import annotations

import sys

import ray

import nrlprof

ray.init(address=sys.argv[1])


@ray.remote(num_cpus=0)
class PolicyWorker:
    def train(self, step: int) -> int:
        return step


workers = [PolicyWorker.options(name=f"policy-{n}").remote() for n in range(2)]
for step in range(1, 5):
    nrlprof.step(step)
    ray.get([w.train.remote(step) for w in workers])
nrlprof.finish()
print("DONE")
