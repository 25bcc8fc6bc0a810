"""AReaL's own LocalScheduler (`scheduler.type=local`), made as AReaL's trainer makes it, in a process of its own
(`python local_scheduler_job.py <directory>`: its fileroot, with its `logs` and `names` folders in it)."""

from __future__ import annotations

import os
import sys

from areal.infra.scheduler.local import LocalScheduler

root = sys.argv[1]
LocalScheduler(gpu_devices=[0], log_dir=os.path.join(root, "logs"), experiment_name="e", trial_name="t",
               fileroot=root, nfs_record_root=os.path.join(root, "names"))  # fmt: skip
