"""Inference engines' own profiler switches, for the work nrlprof's own torch profiler does not reach.

vLLM records its engine processes with its own torch profiler when VLLM_TORCH_PROFILER_DIR is set, switched by
`start_profile()` / `stop_profile()` (its `LLM`, `LLMEngine`, `AsyncLLM`); SGLang's `Engine` has the same two
methods and writes to SGLANG_TORCH_PROFILER_DIR. Where a matched worker's environment sets one of these
variables, nrlprof's torch profiler stands down in the worker's child processes (two torch profilers in one
process crash it), and at each torch window of the worker nrlprof switches the engine's profiler on and off and
records the files it wrote in the manifest, named `<worker>.<engine class>`. Engines are found among the
worker's attributes, two levels down (NeMo RL's `self.llm`, verl's `self.rollout.inference_engine`), by the
package of their class and these method names; nothing is imported. (Neither engine installs where nrlprof is
tested: the tests drive a stand-in class with their package and method names.)
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field

from nrlprof.backends.base import ProcessRole
from nrlprof.config.plan import TORCH
from nrlprof.log import logger
from nrlprof.manifest import WindowRecord
from nrlprof.runtime.process import START, STEP, STOP, Action
from nrlprof.workers.identity import snake_case

SEARCH_DEPTH = 2
SWITCH_METHODS = ("start_profile", "stop_profile")


@dataclass(frozen=True)
class EngineKind:
    label: str
    package: str
    directory_variable: str


ENGINES = (
    EngineKind("vLLM", "vllm", "VLLM_TORCH_PROFILER_DIR"),
    EngineKind("SGLang", "sglang", "SGLANG_TORCH_PROFILER_DIR"),
)


def own_profiler_variable(environ: Mapping[str, str]) -> str | None:
    """The variable that has an engine record this environment's processes with its own torch profiler."""
    return next((e.directory_variable for e in ENGINES if (environ.get(e.directory_variable) or "").strip()), None)


def engine_kind(value: object) -> EngineKind | None:
    package = type(value).__module__.partition(".")[0]
    kind = next((e for e in ENGINES if e.package == package), None)
    if kind is None or not all(callable(getattr(value, m, None)) for m in SWITCH_METHODS):
        return None
    return kind


def find_engines(instance: object, depth: int = SEARCH_DEPTH) -> list[tuple[EngineKind, object]]:
    """Engines among the attributes of `instance` (and of theirs, down to `depth`), each once."""
    found: list[tuple[EngineKind, object]] = []
    seen: set[int] = set()
    level = [instance]
    for _ in range(depth):
        below = []
        for owner in level:
            for value in list(getattr(owner, "__dict__", {}).values()):
                if id(value) in seen or isinstance(value, (str, bytes, int, float, type)):
                    continue
                seen.add(id(value))
                kind = engine_kind(value)
                if kind is not None:
                    found.append((kind, value))
                else:
                    below.append(value)
        level = below
    return found


@dataclass
class Switched:
    """One engine profiling one window."""

    kind: EngineKind
    engine: object
    directory: str
    before: dict[str, tuple[int, int]]
    window: str
    steps: list[int]
    started_at: float
    start_ms: float
    problem: str = ""


@dataclass
class EngineSwitches:
    """The engines of one worker, switched on and off with its torch windows."""

    role: ProcessRole
    write: Callable[[WindowRecord], None]
    switched: list[Switched] = field(default_factory=list)

    def apply(self, instance: object, actions: tuple[Action, ...]) -> list[dict]:
        records: list[dict] = []
        for action in actions:
            if action.kind != TORCH:
                continue
            if action.op == START:
                records += self._stop_all()
                self._start_all(instance, action)
            elif action.op == STEP:
                for item in self.switched:
                    item.steps.append(action.step)
            elif action.op == STOP:
                records += self._stop_all()
        return records

    def _start_all(self, instance: object, action: Action) -> None:
        if own_profiler_variable(os.environ) is None:
            return  # no engine records anything here: its attributes need no walk
        for kind, engine in find_engines(instance):
            directory = os.environ.get(kind.directory_variable, "").strip()
            if not directory:
                continue
            before = _files(directory)
            began = time.perf_counter()
            problem = ""
            try:
                engine.start_profile()
            except Exception as err:
                problem = f"{kind.label}'s start_profile() failed: {err}"
                logger.error("%s: %s", self.role.worker_name, problem)
            start_ms = (time.perf_counter() - began) * 1000
            self.switched.append(Switched(kind, engine, directory, before, action.window.label, [action.step],
                                          time.time(), start_ms, problem))  # fmt: skip

    def _stop_all(self) -> list[dict]:
        records = []
        switched, self.switched = self.switched, []
        for item in switched:
            records.append(self._stop(item))
        return records

    def _stop(self, item: Switched) -> dict:
        began = time.perf_counter()
        problem = item.problem
        if not problem:
            try:
                item.engine.stop_profile()
            except Exception as err:
                problem = f"{item.kind.label}'s stop_profile() failed: {err}"
                logger.error("%s: %s", self.role.worker_name, problem)
        stop_ms = (time.perf_counter() - began) * 1000
        after = _files(item.directory)
        files = sorted(path for path, stamp in after.items() if item.before.get(path) != stamp)
        status = "error" if problem else ("ok" if files else "missing")
        source = f"recorded by {item.kind.label}'s own profiler ({item.kind.directory_variable}={item.directory})"
        message = problem or (source if files else f"{source}, which wrote no file during the window")
        record = WindowRecord(
            backend=TORCH,
            worker=f"{self.role.worker_name}.{snake_case(type(item.engine).__name__)}",
            rank=self.role.rank,
            steps=item.steps,
            window=item.window,
            files=files,
            status=status,
            message=message,
            node_ip=self.role.node_ip,
            started_at=item.started_at,
            start_ms=item.start_ms,
            stop_ms=stop_ms,
        )
        self.write(record)
        return asdict(record)


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
