"""How the tools' tasks work on a node that may be training: at low priority, in a thread, with heartbeats.

The task's own thread only relays: the work runs in a thread of its own at nice NICE (Linux keeps a nice value
per thread, and what the thread starts inherits it; the disk's scheduler follows it where no I/O class is set),
and the task yields `{"files", "bytes"}` done so far at least every HEARTBEAT_S, so that the driver can tell a
slow node from a lost one. The last value it yields holds the work's result, the nice it ran at and its pid.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

NICE = 10
HEARTBEAT_S = 1.0
MAX_WAITING = 4  # messages sent by the work and not yet yielded


class Stopped(Exception):
    """The task was cancelled (its driver stopped following it): the work ends at its next tick."""


class Tally:
    """Files and bytes done so far by the work, read by the relaying thread; `send` hands it a message."""

    def __init__(self, messages: queue.Queue) -> None:
        self.files = 0
        self.bytes = 0
        self._messages = messages
        self.stopped = threading.Event()

    def tick(self, count: int) -> None:
        """The work's bytes done so far; raises Stopped once the task is cancelled."""
        if self.stopped.is_set():
            raise Stopped
        self.bytes = count

    def put(self, item: tuple[bool | None, Any]) -> None:
        """Onto the relay's queue, waiting for room while the task runs; raises Stopped once it is cancelled."""
        while not self.stopped.is_set():
            try:
                self._messages.put(item, timeout=0.5)
                return
            except queue.Full:
                continue
        raise Stopped

    def message(self) -> dict[str, int]:
        return {"files": self.files, "bytes": self.bytes}

    def send(self, message: dict[str, Any]) -> None:
        """Yielded by the task in turn; waits while MAX_WAITING messages wait (the driver reads slower)."""
        self.put((None, message))


def lower_priority(nice: int) -> int:
    """The calling thread at nice `nice` at least (never raised back); the nice it then runs at."""
    current = os.getpriority(os.PRIO_PROCESS, 0)
    if current < nice:
        with contextlib.suppress(OSError):  # raising one's own nice is always allowed; this is belt and braces
            os.setpriority(os.PRIO_PROCESS, 0, nice)
    return os.getpriority(os.PRIO_PROCESS, 0)


def relay(work: Callable[[Tally], Any], nice: int = NICE, heartbeat_s: float = HEARTBEAT_S) -> Iterator[dict]:
    """Run `work(tally)` in a thread at low priority; yield the tally while it runs, then its result.

    Messages the work sends (`tally.send`) are yielded in between, in order. The last value:
    `{"files", "bytes", "result", "nice", "pid"}`. An exception of the work is raised here.
    """
    done: queue.Queue = queue.Queue(MAX_WAITING)
    tally = Tally(done)
    niceness = []

    def run() -> None:
        niceness.append(lower_priority(nice))
        try:
            outcome: tuple[bool, Any] = (True, work(tally))
        except BaseException as exc:  # handed to the relaying thread, which raises it in the task
            outcome = (False, exc)
        with contextlib.suppress(Stopped):
            tally.put(outcome)

    threading.Thread(target=run, name="nrlprof-node-work", daemon=True).start()
    try:
        while True:
            try:
                finished, value = done.get(timeout=heartbeat_s)
            except queue.Empty:
                yield tally.message()
                continue
            if finished is None:
                yield value
                continue
            if not finished:
                raise value
            yield {**tally.message(), "result": value, "nice": niceness[0], "pid": os.getpid()}
            return
    finally:  # cancelled, or done: a work still running stops at its next tick or message
        tally.stopped.set()
