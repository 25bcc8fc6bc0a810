"""The calls the controller submits, timed for the slow-step verdict (nrlprof.runtime.slow.verdict): each from its
submission (the call hook, a few µs) to its completion, which a thread of its own sees by waiting on the calls'
ObjectRefs without fetching them (`ray.wait(fetch_local=False)`: nothing is pulled to the controller or deserialised
twice). Only in a controller armed for slow steps; nothing else ever runs here."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from nrlprof import rayapi
from nrlprof.log import logger

# How long one wait on the calls in flight lasts before the calls submitted meanwhile join it: a call that ends before
# it joins is seen ended up to this late.
WAIT_S = 0.02
# Calls of one step kept at most (a controller that stops stepping keeps no more).
MAX_CALLS = 100_000
_UNKNOWN = object()


class CallClock:
    """`submitted` in the call hook; `take_step` at each step boundary: the step's calls, as [worker, rank, method,
    submitted s, completed s or None, the call's ObjectRef until it is seen complete] lists that the waiting thread
    completes."""

    def __init__(self, identify: Callable[[Any], tuple[str, int] | None]) -> None:
        import ray

        self.identify = identify
        self._reference = ray.ObjectRef
        self._names: dict[object, Any] = {}
        self.current: list[list] = []
        self._new: deque[tuple[Any, list]] = deque()
        self._wake = threading.Event()
        self._idle = False
        self._thread: threading.Thread | None = None
        self._stopped = False

    def submitted(self, handle: Any, method: str, result: Any) -> None:
        if method.startswith("__") or len(self.current) >= MAX_CALLS:
            return
        if not isinstance(result, self._reference):  # several returns complete together; a generator is not timed
            result = result[0] if isinstance(result, (list, tuple)) and result else None
            if not isinstance(result, self._reference):
                return
        key = rayapi.actor_key(handle)
        name = self._names.get(key, _UNKNOWN)
        if name is _UNKNOWN:
            name = self._names[key] = self.identify(handle)
        if name is None:
            return
        entry = [name[0], name[1], method, time.perf_counter(), None, result]
        self.current.append(entry)
        self._new.append((result, entry))
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="nrlprof-slow-calls", daemon=True)
            self._thread.start()
        elif self._idle:
            self._wake.set()

    def take_step(self) -> list[list]:
        """The step's calls; those the thread has not seen end yet are asked about here, without waiting (the step
        boundary often comes as the last of them ends, before the thread has seen it)."""
        ended, self.current = self.current, []
        # Actors not known yet are asked about again (a worker another actor created is known once adopted).
        self._names = {key: name for key, name in self._names.items() if name is not None}
        unseen = [entry for entry in ended if entry[4] is None and entry[5] is not None]
        if unseen and rayapi.connected():
            now = time.perf_counter()
            try:
                ready = _completed([entry[5] for entry in unseen], wait_s=0)
            except Exception:  # their times are left out of this step's verdict
                ready = []
            done = set(ready)
            for entry in unseen:
                if entry[5] in done and entry[4] is None:
                    entry[4] = now
        for entry in ended:
            entry[5] = None
        return ended

    def stop(self) -> None:
        self._stopped = True
        self._wake.set()

    def _run(self) -> None:
        pending: dict[Any, list] = {}
        while not self._stopped:
            while self._new:
                ref, entry = self._new.popleft()
                pending[ref] = entry
            if not pending:
                self._idle = True
                if not self._new:
                    self._wake.wait()
                    self._wake.clear()
                self._idle = False
                continue
            if not rayapi.connected():
                return
            try:
                ready = _completed(list(pending))
            except Exception as err:  # the verdicts go on without these calls' times
                logger.debug("nrlprof could not time the controller's calls: %s", err)
                pending.clear()
                continue
            now = time.perf_counter()
            for ref in ready:
                entry = pending.pop(ref)
                if entry[4] is None:
                    entry[4] = now
                entry[5] = None  # the ref no longer held: its object is the job's to free


def _completed(refs: list, wait_s: float = WAIT_S) -> list:
    """The refs completed within `wait_s` (at least one, where one completes): all of them, at once."""
    import ray

    ready, rest = ray.wait(refs, num_returns=1, timeout=wait_s, fetch_local=False)
    if ready and rest:
        ready += ray.wait(rest, num_returns=len(rest), timeout=0, fetch_local=False)[0]
    return ready
