"""slime's `python train.py <arguments>` on the stand-in, joining the session's cluster: it runs SLIME_TRAIN as
`__main__` with this program's arguments, once Ray is initialised at JOB_ADDRESS with the job's PYTHONPATH for its
workers; prints DONE at the end."""

from __future__ import annotations

import os
import runpy

import ray

ray.init(address=os.environ["JOB_ADDRESS"], runtime_env={"env_vars": {"PYTHONPATH": os.environ["PYTHONPATH"]}})
runpy.run_path(os.environ["SLIME_TRAIN"], run_name="__main__")
print("DONE")
