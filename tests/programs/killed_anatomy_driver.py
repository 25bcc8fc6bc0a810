"""A driver with the step anatomy on that joins the cluster (`ray.init(address="auto")`), steps two policy workers
through steps 1 to 3 and then kills itself (SIGKILL: no finish, no exit hook), leaving the calls to the anatomy's
reader process (`python killed_anatomy_driver.py`)."""

from __future__ import annotations

import os
import signal
import time

import ray

import nrlprof

ray.init(address="auto", log_to_driver=False)


@ray.remote(num_cpus=0)
class PolicyWorker:
    def train(self):
        time.sleep(0.05)


workers = [PolicyWorker.remote() for _ in range(2)]
for step in range(1, 4):
    nrlprof.step(step)
    ray.get([w.train.remote() for w in workers])
time.sleep(1.5)  # the recorder's thread has written the step marks
os.kill(os.getpid(), signal.SIGKILL)  # no finish, no exit hook: the waiting reader process reads the calls
