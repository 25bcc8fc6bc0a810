"""Nsight Systems: the worker runs under `nsys profile`; a window is one CUDA profiler capture range.

nsys writes one report per capture range: `<name>.nsys-rep` with `--capture-range-end=stop`,
`<name>.<k>.nsys-rep` for the k-th range with `repeat:K`; `%p` in the name is the pid of the process
nsys launched (an ancestor of this one under Ray's uv hook). `cudaProfilerStop` returns once the
report is written, so the record lists the files that really exist.

A process the worker started is traced by the same nsys session, and a capture range belongs to one CUDA
context: each such child opens and closes its own range with the worker's window. nsys writes one report per
capture range of its session, holding every process of the session, once the last open range closes. The
worker stops its children's ranges before its own, so its own stop writes the report; it then names that
report in its children's records (`complete_child_record`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from nrlprof import layout
from nrlprof.backends import cuda_profiler_api
from nrlprof.backends.base import Backend
from nrlprof.config.nsys.options import steps_label
from nrlprof.config.plan import NSYS, BackendPlan
from nrlprof.config.steps import Window
from nrlprof.log import logger
from nrlprof.manifest import WindowRecord
from nrlprof.ranges.step_ranges import StepRanges
from nrlprof.workers.identity import WorkerIdentity

# How long a report may take to appear after cudaProfilerStop returned (a slow shared filesystem).
REPORT_WAIT_S = 10.0
ANCESTOR_DEPTH = 4
CHILD_NOTE = (
    "this process's capture range is in the report of its worker '{worker}' (nsys writes one report per capture "
    "range of its session, holding every process of the session)"
)


def _ancestor_pids(depth: int = ANCESTOR_DEPTH) -> list[int]:
    """This process and its parents: one of them is the process nsys launched."""
    pids, pid = [os.getpid()], os.getpid()
    for _ in range(depth):
        try:
            with open(f"/proc/{pid}/stat", "rb") as handle:
                pid = int(handle.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        if pid <= 1:
            break
        pids.append(pid)
    return pids


class NsysBackend(Backend):
    kind = NSYS

    @staticmethod
    def runtime_env_fragment(backend_plan: BackendPlan, identity: WorkerIdentity) -> dict:
        config: dict = dict(backend_plan.options)
        # No steps and a capture range: armed for windows asked for while the job runs (`on-demand`).
        armed = backend_plan.steps is None and config.get("capture-range") == "cudaProfilerApi"
        label = "on-demand" if armed else steps_label(backend_plan.steps)
        config.setdefault("o", layout.nsys_output_name(identity.file_name, label))
        if backend_plan.output_dir and not Path(config["o"]).is_absolute():
            config["o"] = str(Path(backend_plan.output_dir) / config["o"])
        if backend_plan.flags:
            config["flags"] = list(backend_plan.flags)
        return {"_nsight": config}

    def __init__(self, backend_plan, role, target=None) -> None:
        super().__init__(backend_plan, role, target)
        self.ranges = StepRanges()
        self.capture_problem: str | None = None
        self.captures = 0
        # Capture ranges started in this process so far: the k of `<name>.<k>.nsys-rep`.
        self.ranges_started = 0
        self.first_range = 0
        # In a worker: the session's reports when its last window started (its children's are those written since).
        self.reports_before: set[Path] = set()
        self.last_window = ""
        # In a child of a worker (traced by the worker's nsys session): the worker completes the record.
        self.in_workers_session = role.parent is not None
        self.writes_own_record = not self.in_workers_session

    @property
    def repeats(self) -> bool:
        return self.backend_plan.options_dict.get("capture-range-end", "stop").startswith("repeat")

    def start_window(self, window: Window, step: int) -> None:
        self.window, self.steps_seen, self.started_at, self.captures = window, [], time.time(), 0
        self.first_range = self.ranges_started + 1
        if not self.in_workers_session and self.role.identity is not None:
            self.reports_before, self.last_window = set(self._session_reports()), window.label
        self.capture_problem = None if self.discrete else self._start_capture(f"window {window.label}")
        self.mark_step(step)

    def _start_capture(self, what: str) -> str | None:
        problem = cuda_profiler_api.start()
        if problem:
            log = logger.info if self.role.is_controller else logger.warning
            log("nsys %s for %s: %s; recorded, but nsys captures nothing", what, self.role.worker_name, problem)
        else:
            self.captures += 1
            self.ranges_started += 1
        return problem

    def begin_call(self, label: str) -> None:
        """A discrete capture; the call's own NVTX range is opened by the annotation that began it."""
        self.capture_problem = self._start_capture(f"capture of {label}") or self.capture_problem

    def end_call(self) -> None:
        if not self.capture_problem:
            cuda_profiler_api.stop()

    def mark_step(self, step: int) -> None:
        self.steps_seen.append(step)
        if not self.in_workers_session:  # the report's `step <n>` ranges are the worker's
            self.ranges.begin_step(step)

    def stop_window(self) -> WindowRecord:
        self.ranges.end_step()
        problem = self.capture_problem
        if not self.discrete and not problem:
            problem = cuda_profiler_api.stop()
        if problem:
            record = self.record([], "no-cuda", problem)
        elif self.in_workers_session:
            record = self.record([], "ok", CHILD_NOTE.format(worker=self.role.parent.name))
        else:
            record = self._record_reports()
        self.window = None
        return record

    def complete_child_record(self, record: dict) -> dict:
        """A child's record of the window that just closed here: the report of this session that holds it."""
        if record.get("window") != self.last_window or record.get("status") not in ("ok", "late"):
            return record
        reports = self._session_reports()
        deadline = time.monotonic() + REPORT_WAIT_S
        while not (new := [p for p in reports if p not in self.reports_before]) and time.monotonic() < deadline:
            time.sleep(0.1)
            reports = self._session_reports()
        if not new:
            missing = f"no report of this nsys session appeared within {REPORT_WAIT_S:.0f} s of the window's end"
            return {**record, "status": "missing", "message": missing}
        return {**record, "files": [str(p) for p in new]}

    def _record_reports(self) -> WindowRecord:
        """The reports of this window's capture ranges that exist; what is missing, said."""
        expected = self.captures
        found, unfinished = self._reports(), []
        deadline = time.monotonic() + REPORT_WAIT_S
        while self.role.identity is not None and len(found) < expected and time.monotonic() < deadline:
            unfinished = self._unfinished()
            if unfinished:
                break
            time.sleep(0.1)
            found = self._reports()
        files = [str(p) for p in found]
        note = f"{self.captures} discrete capture(s)" if self.discrete else ""
        if self.role.identity is None or len(found) >= expected:
            return self.record(files, "ok", note)
        if unfinished:
            message = (
                f"nsys wrote only raw captures ({', '.join(p.name for p in unfinished)}): its importer failed "
                "(see the raylet log; a missing libdw.so.1 is a known cause); open them with `nsys import`"
            )
            return self.record(files + [str(p) for p in unfinished], "import-failed", message)
        message = f"{expected - len(found)} of {expected} nsys report(s) not found after {REPORT_WAIT_S:.0f} s"
        return self.record(files, "missing", message)

    def _session_reports(self) -> list[Path]:
        """Every report this process's nsys session has written so far."""
        return self._session_files(layout.nsys_reports)

    def _unfinished(self) -> list[Path]:
        return self._session_files(layout.nsys_unfinished)

    def _session_files(self, find: Callable[[str, int], list[Path]]) -> list[Path]:
        """`find(output name, pid)` for the process nsys launched: this one or the first ancestor with files."""
        output = self._output()
        for pid in _ancestor_pids() if "%p" in output else [os.getpid()]:
            found = find(output, pid)
            if found:
                return found
        return []

    def _output(self) -> str:
        name = self.runtime_env_fragment(self.backend_plan, self.role.identity)["_nsight"]["o"]
        if Path(name).is_absolute() or not self.role.session_dir:
            return name
        return str(layout.nsight_dir(self.role.session_dir) / name)

    def _window_ranges(self) -> range:
        return range(self.first_range, self.first_range + self.captures)

    def _reports(self) -> list[Path]:
        if self.role.identity is None or not self.captures:
            return []
        reports = self._session_reports()
        if not self.repeats:
            return reports[:1]
        wanted = {f".{k}{layout.NSYS_REPORT_SUFFIX}" for k in self._window_ranges()}
        return [p for p in reports if any(p.name.endswith(suffix) for suffix in wanted)]
