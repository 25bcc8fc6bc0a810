"""An armed job's driver loop on the shared cluster (RAY_ADDRESS): two DTensorPolicyWorker ranks and a RewardWorker,
stepped `steps` times, printing `STEP <n>` after each and DONE at the end
(`python armed_loop_job.py <steps> <nrlprof|marker> <hold dir>`). `nrlprof`: the loop marks each step with
`nrlprof.step`; `marker`: it does not (the step marker or an adapter does).

Paced by files in `hold dir`: while `hold_at_end` is there, each step takes 0.5 s and the last step waits until it is
removed; while `hold_in_window` is there, a step with a window open in the driver waits too."""

from __future__ import annotations

import os
import sys
import time

import ray
from workload import DTensorPolicyWorker, RewardWorker

import nrlprof
from nrlprof.process import state

steps, marked_by, hold = int(sys.argv[1]), sys.argv[2], sys.argv[3]
PAUSE_S = 0.5


def held(name: str) -> bool:
    return os.path.exists(os.path.join(hold, name))


def window_open() -> bool:
    """Whether nrlprof profiles anything in this process right now."""
    return state.session is not None and state.session.windows.any_open


ray.init(log_to_driver=True)  # RAY_ADDRESS: the cluster
policy = [DTensorPolicyWorker.options(runtime_env={"env_vars": {"RANK": str(r)}}).remote() for r in (0, 1)]
reward = RewardWorker.remote()
for step in range(1, steps + 1):
    if marked_by == "nrlprof":
        nrlprof.step(step)
    ray.get([w.train.remote(step) for w in policy] + [reward.score.remote(step)])
    print("STEP", step, flush=True)
    time.sleep(PAUSE_S if held("hold_at_end") else 0)
    while (held("hold_in_window") and window_open()) or (step == steps and held("hold_at_end")):
        time.sleep(0.05)
nrlprof.finish()
print("DONE", flush=True)
