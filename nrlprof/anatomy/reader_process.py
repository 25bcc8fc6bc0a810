"""The process that reads Ray's task events for the driver, so the driver's own process pays nothing for it.

Started by the driver's recorder (`python -m nrlprof.anatomy.reader_process`) with the GCS address, the
cluster id, the job id, the run directory and the GCS's capacity.  It starts waiting, with nothing imported but
this module (20 ms of CPU, not Ray's 0.4 s), for one line on its stdin: `read` (the GCS holds a quarter of what it
keeps: read as the job goes), `done` (the driver read the job's calls itself at its end: exit), or `finish` or the
end of its stdin (the driver finishes, or ended however it ended, without reading: read them all now).  A job that
makes few calls thus costs its reader nothing while it runs, and a driver killed with SIGKILL still has its calls
read.  Reading, it connects to the GCS as `ray.timeline()`
does (no `ray.init`: it is not a driver and makes no job), with the driver's token where the cluster uses
token authentication (passed in its environment, as Ray passes it to its own workers; the same token goes with
its count of the job's tasks, `gcs_count`), reads once at once,
then runs at a lower priority (nice 10): the GCS fills from the job's start, so the first read must not wait
for an idle core.  It reads until the driver writes `finish` on its stdin, or its stdin closes (the
driver ended, however it ended); then it reads the last events, writes its own figures to `reader.jsonl`
and exits.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import time
from pathlib import Path

from nrlprof.anatomy.files import READER_FILE, append_lines

NICENESS = 10
READ, DONE, FINISH = "read", "done", "finish"  # the driver's words on the reader's stdin


def connect(gcs_address: str, cluster_id: str):
    """A connected GlobalStateAccessor: what `ray._private.state` uses, without a driver."""
    from nrlprof import rayapi

    return rayapi.gcs_state_accessor(gcs_address, cluster_id)


def watch_driver(finishing: threading.Event) -> None:
    """Set `finishing` when the driver says `finish` or its end of the pipe closes."""
    for line in sys.stdin:
        if line.strip() == FINISH:
            break
    finishing.set()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nrlprof.anatomy.reader_process")
    parser.add_argument("gcs_address")
    parser.add_argument("cluster_id")
    parser.add_argument("job_id")
    parser.add_argument("run_dir")
    parser.add_argument("capacity", type=int)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C on the driver ends it through its stdin
    run_dir = Path(args.run_dir)
    command = sys.stdin.readline().strip()
    if command == DONE:
        append_lines(run_dir / READER_FILE, [{"reads": 0, "read_s": 0.0, "read_cpu_s": 0.0,
                                              "process_cpu_s": time.process_time()}])  # fmt: skip
        return 0
    finishing = threading.Event()
    if command == READ:
        threading.Thread(target=watch_driver, args=(finishing,), daemon=True).start()
    else:
        finishing.set()  # "finish", or the driver gone: the last reads at once
    return read(args, run_dir, finishing)


def read(args: argparse.Namespace, run_dir: Path, finishing: threading.Event) -> int:
    from nrlprof.anatomy.gcs_count import job_task_count
    from nrlprof.anatomy.pump import TaskEventPump

    accessor = connect(args.gcs_address, args.cluster_id)
    job_id = bytes.fromhex(args.job_id)
    count = job_task_count(args.gcs_address, job_id)
    pump = TaskEventPump(job_id, run_dir, args.capacity, accessor.get_task_events, count)
    pump.read()  # at once, and at the driver's priority: the GCS fills from the job's start
    started_cpu = time.process_time()
    with contextlib.suppress(OSError):
        os.nice(NICENESS)
    while not finishing.wait(pump.interval_s):
        pump.read()
    began, final_began_cpu = time.perf_counter(), time.process_time()
    pump.final_reads()
    figures = {
        "reads": pump.reads,
        "read_s": pump.read_s,
        "read_cpu_s": pump.read_cpu_s,
        "owner_timed": pump.reader.owner_timed,
        "gaps": pump.gaps,
        "lost": pump.lost_counted,
        "process_cpu_s": time.process_time(),
        "startup_cpu_s": started_cpu,  # imports, the GCS's connection and the first read
        "final_cpu_s": time.process_time() - final_began_cpu,
        "final_s": time.perf_counter() - began,
    }
    append_lines(run_dir / READER_FILE, [figures])
    if count is not None:
        count.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
