"""NRL_STEP_METHOD: steps found in the calls a controller submits, with no step code in the driver.

Step n begins when the controller submits the n-th call of a matching method (on a worker matching the
worker pattern) that follows a call of any other method. A worker group's fan-out of one call to N ranks is
one step, and so are repeated calls in a row. The step's window actions are queued before that call is
submitted, so they reach the workers first. A run that reaches a worker twice is noted (`repeated`): a loop
that calls nothing but the marked method never leaves step 1, and the controller says so once. Ray's and
nrlprof's own calls (`__ray_call__`, ...) do not count.
"""

from __future__ import annotations

import threading
from fnmatch import fnmatchcase
from typing import Any

from nrlprof import rayapi
from nrlprof.config.plan import StepMethod
from nrlprof.workers.identity import WorkerIdentity, snake_case


class StepMarker:
    def __init__(self, method: StepMethod) -> None:
        self.method = method
        self.description = f"the step marker NRL_STEP_METHOD={method.text}"
        self.step = 0
        self._in_run = False
        self._reached: set[object] = set()
        self.repeated = False
        self._lock = threading.Lock()

    def method_matches(self, names: tuple[str, ...], method_name: str) -> bool:
        return fnmatchcase(method_name, self.method.method) and any(
            fnmatchcase(name, self.method.worker) for name in names
        )

    def call(self, matches: bool, workers: tuple[object, ...] = ()) -> int | None:
        """One call (or one run of a compiled graph) that matches the marker or not, reaching `workers`: the
        step it begins."""
        with self._lock:
            if not matches:
                self._in_run = False
                return None
            if self._in_run:
                self.repeated = self.repeated or not self._reached.isdisjoint(workers)
                self._reached.update(workers)
                return None
            self._in_run = True
            self._reached = set(workers)
            self.step += 1
            return self.step


def actor_names(handle: Any, known: dict[str, WorkerIdentity]) -> tuple[str, ...]:
    """The names a worker is matched under: from its creation in this process, else its class."""
    identity = known.get(rayapi.actor_id(handle) or "")
    if identity is not None:
        return identity.match_names
    class_name = rayapi.creation_class_name(handle)
    return () if class_name is None else (class_name, snake_case(class_name))
