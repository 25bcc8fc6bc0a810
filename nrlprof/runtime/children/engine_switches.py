"""Inference engines' own torch profilers (vLLM's, SGLang's `start_profile`/`stop_profile`), switched with a worker's
torch windows where they are on; the worker's children then stand down in those windows. docs/design.md, "Engines'
own profiler switches"."""

from __future__ import annotations

import inspect
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from nrlprof.backends.base import ProcessRole
from nrlprof.config.plan import TORCH
from nrlprof.log import logger
from nrlprof.manifest import Status, WindowRecord
from nrlprof.runtime.children.engine_profilers import OwnProfiler, own_profiler, profile_prefix, stale_variable
from nrlprof.runtime.windows.profiler import PREPARE, SETTLE, START, STEP, STOP, Action
from nrlprof.workers.identity import snake_case

SEARCH_DEPTH = 2
SWITCH_METHODS = ("start_profile", "stop_profile")
ENGINE_PACKAGES = {"vllm": "vLLM", "sglang": "SGLang"}


def engine_label(value: object) -> str | None:
    """`vLLM` or `SGLang` for an engine with a profiler switch; None for anything else."""
    label = ENGINE_PACKAGES.get(type(value).__module__.partition(".")[0])
    if label is None or not all(callable(getattr(value, m, None)) for m in SWITCH_METHODS):
        return None
    return label


def find_engines(instance: object, depth: int = SEARCH_DEPTH) -> list[tuple[str, object]]:
    """Engines among the attributes of `instance` (and of theirs, down to `depth`), each once."""
    found: list[tuple[str, object]] = []
    seen: set[int] = set()
    level = [instance]
    for _ in range(depth):
        below = []
        for owner in level:
            for value in list(getattr(owner, "__dict__", {}).values()):
                if id(value) in seen or isinstance(value, (str, bytes, int, float, type)):
                    continue
                seen.add(id(value))
                label = engine_label(value)
                if label is not None:
                    found.append((label, value))
                else:
                    below.append(value)
        level = below
    return found


@dataclass
class Switched:
    """One engine's own profiler recording one window."""

    label: str
    engine: object
    profiler: OwnProfiler
    before: dict[str, tuple[int, int]]
    window: str
    steps: list[int]
    started_at: float
    start_ms: float
    problem: str = ""


@dataclass
class EngineSwitches:
    """The engines of one worker: their own profilers switched on and off with its torch windows."""

    role: ProcessRole
    write: Callable[[WindowRecord], None]
    switched: list[Switched] = field(default_factory=list)
    # The engines' own profilers record the torch window now open or prepared: the children stand down in it.
    engines_record: bool = False
    _said: set[str] = field(default_factory=set)

    def apply(self, instance: object, actions: tuple[Action, ...]) -> tuple[list[WindowRecord], tuple[Action, ...]]:
        """Switch the engines for these actions; the records written, and the actions left for the children."""
        records: list[WindowRecord] = []
        for_children: list[Action] = []
        for action in actions:
            if action.kind != TORCH or action.op == SETTLE:
                for_children.append(action)
                continue
            if action.op == PREPARE:
                self.engines_record = bool(self._switched_on(instance, action.window.label))
            elif action.op == START:
                records += self._stop_all()
                self._start_all(instance, action)
                self.engines_record = any(not item.problem for item in self.switched)
            elif action.op == STEP:
                for item in self.switched:
                    item.steps.append(action.step)
            elif action.op == STOP:
                records += self._stop_all()
            if not self.engines_record:
                for_children.append(action)
            if action.op == STOP:
                self.engines_record = False
        return records, tuple(for_children)

    def _switched_on(self, instance: object, window: str) -> list[tuple[str, object, OwnProfiler]]:
        prefix = profile_prefix(self.role.worker_name, self.role.rank, window)
        found = []
        for label, engine in find_engines(instance):
            profiler = own_profiler(engine, os.environ, prefix)
            if profiler is not None:
                found.append((label, engine, profiler))
                continue
            variable = stale_variable(engine, os.environ)
            if variable:
                self._say_once(
                    f"{self.role.worker_name}: {variable} is set, but this vLLM no longer reads it (its own profiler "
                    "is switched on by --profiler-config, engine argument profiler_config, since 0.16): nrlprof's "
                    "torch profiler records the engine's processes itself"
                )
        return found

    def _start_all(self, instance: object, action: Action) -> None:
        for label, engine, profiler in self._switched_on(instance, action.window.label):
            before = _files(profiler.directory)
            began = time.perf_counter()
            problem = ""
            try:
                result = engine.start_profile(**profiler.start_arguments)
                if inspect.isawaitable(result):
                    _close(result)
                    raise TypeError("its start_profile() is a coroutine, which a window action cannot wait for")
            except Exception as err:
                problem = f"{label}'s start_profile() failed: {err}"
                logger.warning(
                    "%s: %s; nrlprof's own torch profiler records the engine's processes in this window",
                    self.role.worker_name,
                    problem,
                )
            else:
                self._say_once(
                    f"{self.role.worker_name}: {label}'s own torch profiler records the engine's processes in torch "
                    f"windows ({profiler.source}); nrlprof's torch profiler stands down there"
                )
            start_ms = (time.perf_counter() - began) * 1000
            self.switched.append(Switched(label, engine, profiler, before, action.window.label, [action.step],
                                          time.time(), start_ms, problem))  # fmt: skip

    def _say_once(self, message: str) -> None:
        if message not in self._said:
            self._said.add(message)
            logger.info(message)

    def _stop_all(self) -> list[WindowRecord]:
        switched, self.switched = self.switched, []
        return [self._stop(item) for item in switched]

    def _stop(self, item: Switched) -> WindowRecord:
        began = time.perf_counter()
        problem = item.problem
        if not problem:
            try:
                _close(item.engine.stop_profile())
            except Exception as err:
                problem = f"{item.label}'s stop_profile() failed: {err}"
                logger.error("%s: %s", self.role.worker_name, problem)
        stop_ms = (time.perf_counter() - began) * 1000
        after = _files(item.profiler.directory)
        files = sorted(path for path, stamp in after.items() if item.before.get(path) != stamp)
        source = f"recorded by {item.label}'s own profiler ({item.profiler.source})"
        if item.problem:
            status, message = Status.SKIPPED, f"{problem}; nrlprof's own torch profiler recorded the engine's processes"
        elif problem:
            status, message = Status.ERROR, problem
        else:
            status = Status.OK if files else Status.MISSING
            message = source if files else f"{source}, which wrote no file during the window"
        record = WindowRecord(
            backend=TORCH,
            worker=f"{self.role.worker_name}.{snake_case(type(item.engine).__name__)}",
            rank=self.role.rank,
            steps=tuple(item.steps),
            window=item.window,
            files=tuple(files),
            status=status,
            message=message,
            node_ip=self.role.node_ip,
            started_at=item.started_at,
            start_ms=item.start_ms,
            stop_ms=stop_ms,
        )
        self.write(record)
        return record


def _close(result: object) -> None:
    """A coroutine that will not be awaited, closed (no 'never awaited' warning)."""
    close = getattr(result, "close", None)
    if inspect.iscoroutine(result) and callable(close):
        close()


def _files(directory: str) -> dict[str, tuple[int, int]]:
    """Every file under `directory`, with its size and modification time."""
    found = {}
    for root, _dirs, names in os.walk(directory):
        for name in names:
            path = os.path.join(root, name)
            try:
                stat = os.stat(path)
            except OSError:
                continue
            found[os.path.abspath(path)] = (stat.st_size, stat.st_mtime_ns)
    return found
