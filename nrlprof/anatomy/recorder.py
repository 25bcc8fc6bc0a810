"""The driver's step-anatomy recorder: step marks and actor identities, with Ray's task events read beside it.

The training loop only appends to lists (`marks` by the gate at each `nrlprof.step`, `actors` by the
creation hook); a daemon thread writes them once a second.  Ray's task events are read by a separate,
low-priority process (`reader_process`): parsing them costs about 10 us per call, which in the driver's process
would take the driver's GIL from the training loop.  So that the reading costs what the calls need and not what
the clock says, that process waits, without importing Ray, until the GCS holds a quarter of the task events it
keeps (the driver asks the GCS for the job's count now and then, each time when a quarter would have arrived at the
rate seen); then it reads as the job goes, and a job longer than the GCS keeps still has its early steps on disk.
A job that never gets there is read by the driver at its end, and a driver that ends without its end (SIGKILL)
is read by the waiting process.  Should that process not start or die, the driver's thread reads them itself
(said in the log).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from nrlprof import rayapi
from nrlprof.anatomy.events import fetch_raw_task_events
from nrlprof.anatomy.files import (
    ACTORS_FILE,
    META_FILE,
    READER_FILE,
    STEPS_FILE,
    append_lines,
    new_run_directory,
    read_lines,
)
from nrlprof.anatomy.gcs_count import JobTaskCount, job_task_count
from nrlprof.anatomy.pump import (
    CAPACITY_SHARE,
    DEFAULT_GCS_CAPACITY,
    FINAL_LIMIT_S,
    MAX_INTERVAL_S,
    MIN_INTERVAL_S,
    TaskEventPump,
)
from nrlprof.anatomy.reader_process import DONE, FINISH, READ
from nrlprof.anatomy.settings import AnatomySettings
from nrlprof.log import logger
from nrlprof.process.import_hooks import imported_already
from nrlprof.process.lifecycle import ANATOMY, LIFECYCLE

WRITE_INTERVAL_S = 1.0
# The reader process's last reads take at most FINAL_LIMIT_S; beyond this it is ended.
READER_EXIT_S = FINAL_LIMIT_S + 20.0


class Recorder:
    def __init__(self, settings: AnatomySettings) -> None:
        self.settings = settings
        self.marks: list[tuple] = []  # the gate's: see Gate.marks
        self.actors: list[dict] = []
        self._run_dir: Path | None = None
        self.reads = 0
        self.read_s = 0.0
        self.read_cpu_s = 0.0
        self.thread_cpu_s = 0.0
        self.owner_timed = 0
        self.gaps = 0
        self.lost: int | None = None  # calls the GCS let go before a read saw them; None where it was not told
        self._marks_written = 0
        self._actors_written = 0
        self._connected = False
        self._job_id = ""
        self._capacity = DEFAULT_GCS_CAPACITY
        self._child: subprocess.Popen | None = None
        self._pump: TaskEventPump | None = None
        self._task_count: JobTaskCount | None = None  # the GCS's count of the job's tasks, asked from here
        self._reading = False  # the reader process was told to read as the job goes
        self._next_check = 0.0
        self._checked: tuple[float, int] | None = None  # (when, count) of the last check
        self._next_read = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._finished = False
        self._thread = threading.Thread(target=self._loop, name="nrlprof-step-anatomy", daemon=True)

    @property
    def started(self) -> bool:
        return self._thread.is_alive() or self._finished

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
        self.actors.append({"actor_id": rayapi.actor_id(handle), "worker": name, "rank": rank, "class": class_name})

    def _loop(self) -> None:
        while not self._stop.wait(WRITE_INTERVAL_S):
            try:
                self.poll()
            except Exception as err:  # the recorder must never disturb the job
                logger.warning("step anatomy: writing the step marks or reading Ray's task events failed: %s", err)
        self.thread_cpu_s = time.thread_time()

    def poll(self) -> None:
        """Write what the driver marked; start the reader process once Ray is up; read here if it died."""
        if not self.marks:
            return
        with self._lock:
            self._write_marks()
            if not self._connected:
                self._connect()
            if self._child is not None and self._child.poll() is not None:
                code = self._child.returncode
                logger.warning("step anatomy: the task-event reader exited (%s); reading in the driver", code)
                self._child = None
                self._read_here()
            if self._child is not None and not self._reading and time.monotonic() >= self._next_check:
                self._check_count()
            if self._pump is not None and time.monotonic() >= self._next_read:
                self._pump.read()
                self._next_read = time.monotonic() + self._pump.interval_s

    def _write_marks(self) -> None:
        marks, actors = self.marks, self.actors
        end, actors_end = len(marks), len(actors)
        append_lines(self.run_dir / STEPS_FILE, [mark_line(m) for m in marks[self._marks_written : end]])
        append_lines(self.run_dir / ACTORS_FILE, actors[self._actors_written : actors_end])
        self._marks_written, self._actors_written = end, actors_end

    def _connect(self) -> None:
        ray = imported_already("ray")
        if ray is None or not ray.is_initialized():
            return
        self._connected = True
        context = ray.get_runtime_context()
        self._job_id = context.get_job_id()
        try:
            self._capacity = int(ray._config.task_events_max_num_task_in_gcs())
        except Exception:
            self._capacity = DEFAULT_GCS_CAPACITY
        meta = {"job_id": self._job_id, "driver_node_id": context.get_node_id(), "pid": os.getpid()}
        meta["t_ns"] = time.time_ns()
        append_lines(self.run_dir / META_FILE, [meta])
        try:
            self._child = start_reader_process(self._job_id, self.run_dir, self._capacity)
        except Exception as err:
            logger.warning("step anatomy: no task-event reader process (%s); reading in the driver", err)
            self._read_here()
        else:
            self._task_count = job_task_count(context.gcs_address, bytes.fromhex(self._job_id))
            if self._task_count is None:
                self._tell_child(READ)  # no count to wait on: read as the job goes
            self._next_check = time.monotonic() + MIN_INTERVAL_S
        LIFECYCLE.add(ANATOMY, self.finish)

    def _check_count(self) -> None:
        """Tell the reader to read once the GCS holds a quarter of what it keeps; else check again when a quarter
        would have arrived at the rate seen since the last check (1 s to 60 s)."""
        now = time.monotonic()
        try:
            had = self._task_count()
        except Exception:
            had = None
        if had is None or had >= CAPACITY_SHARE * self._capacity:
            self._tell_child(READ)
            return
        interval = MIN_INTERVAL_S
        if self._checked is not None:
            then, before = self._checked
            rate = (had - before) / max(now - then, 1e-3)
            left = CAPACITY_SHARE * self._capacity - had
            interval = left / rate if rate > 0 else 2 * (now - then)
        self._checked = (now, had)
        self._next_check = now + min(MAX_INTERVAL_S, max(MIN_INTERVAL_S, interval))

    def _tell_child(self, word: str) -> None:
        if self._child is None:
            return
        try:
            self._child.stdin.write(f"{word}\n")
            self._child.stdin.flush()
        except OSError:
            pass
        self._reading = self._reading or word == READ

    def _read_here(self) -> None:
        if self._pump is None:
            import ray

            job_id = bytes.fromhex(self._job_id)
            if self._task_count is None:
                self._task_count = job_task_count(ray.get_runtime_context().gcs_address, job_id)
            self._pump = TaskEventPump(job_id, self.run_dir, self._capacity, fetch_raw_task_events, self._task_count)

    def finish(self) -> None:
        """Mark the end of the last step; the reader reads the last calls (Ray sends them within a second)."""
        if self._finished:
            return
        self._finished = True
        ended = time.time_ns()
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()
        if not self.marks:
            self._end_child(DONE)
            return
        try:
            with self._lock:
                self._write_marks()
                if not self._connected:
                    self._connect()
                if self._child is not None and not self._reading:
                    self._read_at_the_end()  # its final reads included
                else:
                    if self._child is not None and not self._end_child():
                        self._read_here()
                    if self._pump is not None:
                        self._pump.final_reads()
        except Exception as err:
            logger.warning("step anatomy: the last task events could not be read: %s", err)
        finally:
            append_lines(self.run_dir / STEPS_FILE, [{"finish": True, "t_ns": ended}])
            if self._task_count is not None:
                self._task_count.close()
        self._gather_figures()
        if self.reads:
            logger.info(
                "step anatomy: %d read(s) of Ray's task events, %.1f ms in all; files under %s",
                self.reads,
                self.read_s * 1000,
                self.run_dir,
            )
        if self.owner_timed:
            logger.info(
                "step anatomy: %d call(s) timed from submission to end by their caller: the worker's own "
                "events never reached Ray's GCS",
                self.owner_timed,
            )
        if self.lost:
            logger.warning(
                "step anatomy: Ray's GCS let %d call(s) go before they were read (it keeps %d task events: "
                "raise RAY_task_events_max_num_task_in_gcs before `ray start` / `ray.init`); `nrlprof summary` "
                "names the steps that lack them",
                self.lost,
                self._capacity,
            )
        elif self.gaps and self.lost is None:
            logger.warning(
                "step anatomy: Ray's GCS was full (it keeps %d task events: RAY_task_events_max_num_task_in_gcs) "
                "and may have let calls go before they were read; `nrlprof summary` names the steps that may lack "
                "calls",
                self._capacity,
            )

    def _read_at_the_end(self) -> None:
        """A job that never filled a quarter of the GCS: its calls read here, at its end; the waiting reader
        released (or asked to read them, should this fail)."""
        try:
            self._read_here()
            assert self._pump is not None
            self._pump.final_reads()
        except Exception as err:
            logger.warning("step anatomy: reading the last task events here failed (%s); the reader reads them", err)
            self._pump = None
            if not self._end_child():
                raise
            return
        self._end_child(DONE)

    def _end_child(self, word: str = FINISH) -> bool:
        """Ask the reader for its last reads (or, `done`, to end) and wait for it; True when it ended well."""
        child, self._child = self._child, None
        if child is None:
            return True
        try:
            child.stdin.write(f"{word}\n")
            child.stdin.close()
        except OSError:
            pass
        try:
            return child.wait(READER_EXIT_S) == 0
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            return False

    def _gather_figures(self) -> None:
        figures = read_lines(self.run_dir / READER_FILE)
        for line in figures:
            self.reads += line["reads"]
            self.read_s += line["read_s"]
            self.read_cpu_s += line["read_cpu_s"]
            self.owner_timed += line.get("owner_timed", 0)
            self.gaps += line.get("gaps", 0)
            self._add_lost(line.get("lost"))
        if self._pump is not None:
            self.reads += self._pump.reads
            self.read_s += self._pump.read_s
            self.read_cpu_s += self._pump.read_cpu_s
            self.owner_timed += self._pump.reader.owner_timed
            self.gaps += self._pump.gaps
            self._add_lost(self._pump.lost_counted)

    def _add_lost(self, lost: int | None) -> None:
        if lost is not None:
            self.lost = (self.lost or 0) + lost


def mark_line(mark: tuple) -> dict:
    """A step mark, or the gate's own window work (`profiler`: what it did, from start_ns to end_ns)."""
    if len(mark) == 2:
        return {"step": mark[0], "t_ns": mark[1]}
    step, start_ns, end_ns, what = mark
    return {"profiler": what, "at_step": step, "start_ns": start_ns, "end_ns": end_ns}


def start_reader_process(job_id: str, run_dir: Path, capacity: int) -> subprocess.Popen:
    """`python -m nrlprof.anatomy.reader_process` for this driver's job, with the driver's Ray token if any."""
    # Without nrlprof's own variables: the reader is no driver to activate nrlprof in.
    env = {name: value for name, value in os.environ.items() if not name.startswith(("NRL_", "NRLPROF_"))}
    package_root = str(Path(__file__).resolve().parents[2])  # the directory that holds nrlprof/
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    env.update(ray_auth_environment())
    command = [sys.executable, "-m", "nrlprof.anatomy.reader_process", *rayapi.gcs_address_and_cluster_id()]
    command += [job_id, str(run_dir), str(capacity)]
    return subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env, text=True)


def ray_auth_environment() -> dict[str, str]:
    """RAY_AUTH_MODE and RAY_AUTH_TOKEN as this driver uses them, where the cluster uses token authentication."""
    return rayapi.auth_environment()
