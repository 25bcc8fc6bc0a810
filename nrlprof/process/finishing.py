"""What is left of a window's files once its profiler stopped (torch's export, the check, compression and move into
place, the record), done on one thread of the process beside the job's next step, in order; whatever needs the files
waits for them first (`settle`). docs/design.md, "Steps, and gating"."""

from __future__ import annotations

import contextlib
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from nrlprof import layout
from nrlprof.log import logger
from nrlprof.process.lifecycle import FINISHER as FINISHING
from nrlprof.process.lifecycle import LIFECYCLE, Lifecycle

Job = Callable[[], None]
# A job that waits for the next call begins anyway after this long: a worker no call reaches (a compiled graph's
# loop, a worker the job stopped calling) still has its files final soon after the stop.
WAIT_FOR_NEXT_CALL_S = 1.0


class Finisher:
    """One daemon thread running the jobs handed to it, in order, started at the first."""

    def __init__(self, name: str = "nrlprof-finish", lifecycle: Lifecycle | None = None) -> None:
        """`lifecycle`: where the process's own finisher settles at exit and starts afresh after a fork (the
        parent's jobs and thread are not the child's)."""
        self.name = name
        self.lifecycle = lifecycle
        self._reset()
        if lifecycle is not None:
            lifecycle.on_fork(FINISHING, self._reset)

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        # (when it was handed over, when it begins at the latest, the job)
        self._jobs: queue.SimpleQueue[tuple[float, float, Job]] = queue.SimpleQueue()
        self._unfinished = 0
        self._thread: threading.Thread | None = None
        self._held: list[Job] | None = None
        self._go = threading.Event()
        self._go_at = 0.0  # when waiting jobs were last told to begin (`begin`)
        # Files named but not written yet: a later file of the same name takes the next free one.
        self._reserved: set[Path] = set()

    def run(self, job: Job, wait_for_next_call: bool = False) -> None:
        """`job` beside the next step: at once, or (`wait_for_next_call`) once `begin` says the next call began.
        Run on the caller's thread where no thread can start any more (the interpreter is ending)."""
        with self._lock:
            if self._held is not None and not sys.is_finalizing():
                self._held.append(job)
                return
        self._start(job, WAIT_FOR_NEXT_CALL_S if wait_for_next_call else 0.0)

    def _start(self, job: Job, wait_s: float = 0.0) -> None:
        if sys.is_finalizing():
            _run(job)
            return
        with self._lock:
            self._unfinished += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
                self._thread.start()
                if self.lifecycle is not None:  # daemon threads still run while the exit hooks do
                    self.lifecycle.add(FINISHING, self.settle)
        now = time.monotonic()
        self._jobs.put((now, now + wait_s, job))

    def begin(self) -> None:
        """The jobs waiting for the next call begin now (it began, or something waits for them)."""
        self._go_at = time.monotonic()
        self._go.set()

    def _loop(self) -> None:
        while True:
            handed_at, latest, job = self._jobs.get()
            while self._go_at < handed_at and (left := latest - time.monotonic()) > 0:
                self._go.wait(left)
                self._go.clear()
            try:
                _run(job)
            finally:
                with self._lock:
                    self._unfinished -= 1
                    if not self._unfinished:
                        self._idle.notify_all()

    @contextlib.contextmanager
    def holding(self) -> Iterator[None]:
        """Jobs handed over inside begin when it ends: the controller's own trace is written once its workers
        answered the stop, not beside their stops on the same cores."""
        with self._lock:
            outer = self._held is not None
            if not outer:
                self._held = []
        try:
            yield
        finally:
            if not outer:
                self._release_held()

    def _release_held(self) -> None:
        with self._lock:
            held, self._held = self._held or [], None
        for job in held:
            self._start(job)

    def settle(self, timeout: float | None = None) -> bool:
        """Wait until every job handed over so far is done (waiting and held ones begin now); False if `timeout` ran
        out."""
        with self._lock:
            held, self._held = self._held or [], (None if self._held is None else [])
        for job in held:
            self._start(job)
        self.begin()
        with self._lock:
            return self._idle.wait_for(lambda: not self._unfinished, timeout)

    @property
    def pending(self) -> bool:
        """Jobs not done yet (read without the lock: a call that just missed them settles at the next)."""
        return bool(self._unfinished or self._held)

    def unused_path(self, path: Path) -> Path:
        """`layout.unused_path`, also past the files named but not written yet; reserved until `written`."""
        with self._lock:
            chosen = layout.unused_path(path, taken=lambda p: p in self._reserved or p.exists())
            self._reserved.add(chosen)
        return chosen

    def written(self, path: Path) -> None:
        with self._lock:
            self._reserved.discard(path)


def _run(job: Job) -> None:
    try:
        job()
    except Exception as err:  # a job reports its own failures; this is a bug's last line of defence
        logger.error("finishing a profiler file failed: %s", err)


# The process's one finisher: its files and records in the order their windows stopped.
FINISHER = Finisher(lifecycle=LIFECYCLE)
