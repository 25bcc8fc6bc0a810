"""The driver's step-anatomy recorder: step marks, actor identities and Ray's task events, written as the job goes.

The training loop only appends to lists (`marks` by the gate at each `nrlprof.step`, `actors` by the
creation hook); a daemon thread writes them and reads the GCS's task events, so a job longer than the
GCS keeps (`RAY_task_events_max_num_task_in_gcs`, 100,000 task attempts) still has its early steps on
disk.  Every read returns all the GCS holds, so reads are spaced by how fast the GCS fills: the next one
comes when a quarter of its capacity has arrived since the last (the oldest are evicted first), at
least a second and at most a minute apart.  A job that stays within the GCS's capacity is read a few
times; a long one is read about four times per capacity's worth of calls.  Ray releases the GIL while
the GCS answers; the driver's cost is parsing each new event once (about 10 us) and skipping known ones.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from nrlprof.anatomy.events import TaskEventReader, fetch_raw_task_events
from nrlprof.anatomy.files import ACTORS_FILE, META_FILE, STEPS_FILE, TASKS_FILE, append_lines, new_run_directory
from nrlprof.anatomy.settings import AnatomySettings
from nrlprof.log import logger

MIN_INTERVAL_S = 1.0
MAX_INTERVAL_S = 60.0
CAPACITY_SHARE = 0.25
DEFAULT_GCS_CAPACITY = 100_000
# At finish: Ray workers send their events every second; wait for them, at most this long.
FINAL_SETTLE_S = 1.5
FINAL_LIMIT_S = 10.0


class Recorder:
    def __init__(self, settings: AnatomySettings) -> None:
        self.settings = settings
        self.marks: list[tuple[int, int]] = []
        self.actors: list[dict] = []
        self._run_dir: Path | None = None
        self.interval_s = MIN_INTERVAL_S
        self.reads = 0
        self.read_s = 0.0
        self.read_cpu_s = 0.0
        self._last_read = 0.0
        self._capacity = DEFAULT_GCS_CAPACITY
        self._marks_written = 0
        self._actors_written = 0
        self._reader: TaskEventReader | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._finished = False
        self._thread = threading.Thread(target=self._loop, name="nrlprof-step-anatomy", daemon=True)

    def start(self) -> Recorder:
        self._thread.start()
        logger.info("step anatomy: recording every worker's calls per step under %s", self.settings.directory)
        return self

    @property
    def run_dir(self) -> Path:
        """Made at the first step: a session that never steps leaves no directory behind."""
        if self._run_dir is None:
            self._run_dir = new_run_directory(self.settings.directory)
        return self._run_dir

    def actor_created(self, handle: Any, name: str, rank: int, class_name: str) -> None:
        self.actors.append({"actor_id": handle._actor_id.hex(), "worker": name, "rank": rank, "class": class_name})

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.poll()
            except Exception as err:  # the recorder must never disturb the job
                logger.warning("step anatomy: reading Ray's task events failed: %s", err)

    def poll(self) -> int:
        """Write what the driver marked, then the calls finished since the last read; returns how many."""
        if not self.marks:
            return 0
        with self._lock:
            self._write_marks()
            reader = self._reader or self._connect()
            if reader is None:
                return 0
            began, cpu_began = time.perf_counter(), time.thread_time()
            records = reader.read(fetch_raw_task_events())
            append_lines(self.run_dir / TASKS_FILE, records)
            now = time.perf_counter()
            self.reads += 1
            self.read_s += now - began
            self.read_cpu_s += time.thread_time() - cpu_began
            self.interval_s = self._next_interval(reader.fresh, now - self._last_read if self._last_read else None)
            self._last_read = now
            return len(records)

    def _next_interval(self, fresh: int, elapsed_s: float | None) -> float:
        """Seconds until a quarter of the GCS's capacity has arrived at the rate seen since the last read."""
        if elapsed_s is None or fresh <= 0:
            return MIN_INTERVAL_S if elapsed_s is None else min(MAX_INTERVAL_S, 2 * self.interval_s)
        rate = fresh / elapsed_s
        return min(MAX_INTERVAL_S, max(MIN_INTERVAL_S, CAPACITY_SHARE * self._capacity / rate))

    def _write_marks(self) -> None:
        marks, actors = self.marks, self.actors
        end, actors_end = len(marks), len(actors)
        append_lines(self.run_dir / STEPS_FILE, [{"step": s, "t_ns": t} for s, t in marks[self._marks_written : end]])
        append_lines(self.run_dir / ACTORS_FILE, actors[self._actors_written : actors_end])
        self._marks_written, self._actors_written = end, actors_end

    def _connect(self) -> TaskEventReader | None:
        ray = sys.modules.get("ray")
        if ray is None or not ray.is_initialized():
            return None
        context = ray.get_runtime_context()
        job_id = context.get_job_id()
        self._reader = TaskEventReader(bytes.fromhex(job_id))
        try:
            self._capacity = int(ray._config.task_events_max_num_task_in_gcs())
        except Exception:
            self._capacity = DEFAULT_GCS_CAPACITY
        meta = {"job_id": job_id, "driver_node_id": context.get_node_id(), "pid": os.getpid(), "t_ns": time.time_ns()}
        append_lines(self.run_dir / META_FILE, [meta])
        # Registered after ray.init, so it runs before Ray's own shutdown hook.
        atexit.register(self.finish)
        return self._reader

    def finish(self) -> None:
        """Mark the end of the last step and read the last calls (Ray sends them within a second)."""
        if self._finished:
            return
        self._finished = True
        ended = time.time_ns()
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()
        if not self.marks:
            return
        try:
            self._final_reads(ended)
        except Exception as err:
            logger.warning("step anatomy: the last task events could not be read: %s", err)
        finally:
            append_lines(self.run_dir / STEPS_FILE, [{"finish": True, "t_ns": ended}])
        if self.reads:
            logger.info(
                "step anatomy: %d read(s) of Ray's task events, %.1f ms in all; files under %s",
                self.reads,
                self.read_s * 1000,
                self.run_dir,
            )

    def _final_reads(self, ended: int) -> None:
        self.poll()
        if self._reader is None:
            return
        began = time.monotonic()
        quiet = False
        while time.monotonic() - began < FINAL_LIMIT_S:
            time.sleep(0.5)
            new = self.poll()
            settled = time.monotonic() - began >= FINAL_SETTLE_S
            if settled and quiet and new == 0 and self._reader.pending == 0:
                return
            quiet = new == 0
