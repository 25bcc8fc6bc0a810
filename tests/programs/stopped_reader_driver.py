"""A driver whose anatomy reader is stopped (SIGSTOP) for step 2 while two actors take `burst` calls each, more than
the GCS keeps; steps 1 and 3 take a call per actor. Prints the job's id as JSON last
(`python stopped_reader_driver.py <burst>`, joining the cluster RAY_ADDRESS names, with the step anatomy on)."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import ray

import nrlprof
from nrlprof.anatomy import recorder

# The reader is told to read as the job goes from its start, as where the GCS cannot count the job's tasks: the
# driver's count checks, spaced by the rate they see, could otherwise come after this short job's burst, and the
# driver would read the job at its end itself (which counts and says what was lost too, with no reader to stop).
recorder.job_task_count = lambda _gcs_address, _job_id: None

ray.init(log_to_driver=False)


@ray.remote(num_cpus=0)
class ShortStep:
    def work(self, seconds):
        time.sleep(seconds)
        return 1


def reader_pid() -> int | None:
    """The pid of this driver's anatomy reader process."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            parent = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        if b"nrlprof.anatomy.reader_process" in cmdline and parent == os.getpid():
            return int(pid)
    return None


workers = [ShortStep.remote() for _ in range(2)]
nrlprof.step(1)
ray.get([w.work.remote(0) for w in workers])
began = time.monotonic()
while (pid := reader_pid()) is None and time.monotonic() - began < 60:
    time.sleep(0.2)
os.kill(pid, signal.SIGSTOP)  # a reader that gets no CPU while the job outruns what the GCS keeps
try:
    nrlprof.step(2)
    ray.get([w.work.remote(0) for w in workers for _ in range(int(sys.argv[1]))])
    time.sleep(3)  # the workers' and owner's last events of step 2 reach the GCS (sent once a second)
finally:
    os.kill(pid, signal.SIGCONT)
nrlprof.step(3)
ray.get([w.work.remote(0) for w in workers])
nrlprof.finish()
print(json.dumps({"job_id": ray.get_runtime_context().get_job_id()}))
