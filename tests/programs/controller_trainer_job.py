"""A controller actor in verl's TaskRunner shape, on the cluster of `ray start` (`address="auto"`): a Trainer actor
creates two DTensorPolicyWorker ranks and a RewardWorker and runs the training loop, `steps` steps of a score and a
train; prints `TRAINER <steps> <the trainer's pid>` at the end
(`python controller_trainer_job.py <steps> <nrlprof|marker> [<hold dir>]`). `nrlprof`: the trainer marks each step
with `nrlprof.step`; `marker`: it does not (NRL_STEP_METHOD does). While `hold dir` holds `hold_at_end`, each step
takes 0.5 s and the last step waits until it is removed. The job's PYTHONPATH is its workers'."""

from __future__ import annotations

import os
import sys
import time

import ray

PAUSE_S = 0.5


@ray.remote(num_cpus=0)
class Trainer:
    def run(self, steps: int, marked_by: str, hold: str | None) -> tuple[int, int]:
        from workload import DTensorPolicyWorker, RewardWorker

        def held() -> bool:
            return hold is not None and os.path.exists(os.path.join(hold, "hold_at_end"))

        policy = [DTensorPolicyWorker.options(runtime_env={"env_vars": {"RANK": str(r)}}).remote() for r in (0, 1)]
        reward = RewardWorker.remote()
        for step in range(1, steps + 1):
            if marked_by == "nrlprof":
                import nrlprof

                nrlprof.step(step)
            ray.get(reward.score.remote(step))
            ray.get([w.train.remote(step) for w in policy])
            time.sleep(PAUSE_S if held() else 0)
            while step == steps and held():
                time.sleep(0.05)
        import nrlprof

        nrlprof.finish()
        return steps, os.getpid()


ray.init(address="auto", log_to_driver=True, runtime_env={"env_vars": {"PYTHONPATH": os.environ["PYTHONPATH"]}})
steps, marked_by, hold = int(sys.argv[1]), sys.argv[2], (sys.argv[3] if len(sys.argv) > 3 else None)
print("TRAINER", *ray.get(Trainer.remote().run.remote(steps, marked_by, hold)), flush=True)
