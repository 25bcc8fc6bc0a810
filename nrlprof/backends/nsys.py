"""Nsight Systems: the worker runs under `nsys profile` (or, armed for windows asked for, `nsys launch` with a session
of its own); a window is one CUDA profiler capture range. When nsys writes each report, and the record of a window
whose report comes later (`pending`): docs/design.md, "Steps, and gating". A process the worker started is traced by
the worker's nsys session: the worker names the session's report in its children's records (`complete_child_record`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from nrlprof import layout
from nrlprof.backends import cuda_profiler_api
from nrlprof.backends.base import Backend
from nrlprof.backends.nsys_session import disturbed, gone_message, session_listed
from nrlprof.config.nsys.options import LAUNCH_OPTIONS, SESSION_OPTION, captures_allowed, option_words, steps_label
from nrlprof.config.plan import NSYS, BackendPlan
from nrlprof.config.steps import Window
from nrlprof.config.variables import NSYS_SESSION_VARIABLE
from nrlprof.log import logger
from nrlprof.manifest import Status, WindowRecord
from nrlprof.ranges.step_ranges import StepRanges
from nrlprof.workers.identity import WorkerIdentity

# How long a report may take to appear after cudaProfilerStop returned (a slow shared filesystem).
REPORT_WAIT_S = 10.0
# `nsys start` took 0.10 s on an H200 (nsys 2025.3.1); a loaded node gets far more.
NSYS_START_TIMEOUT_S = 60.0
ON_DEMAND_LABEL = "on-demand"
SLOW_LABEL = "slow"
ANCESTOR_DEPTH = 4
CHILD_NOTE = (
    "this process's capture range is in the report of its worker '{worker}' (nsys writes one report per capture "
    "range of its session, holding every process of the session)"
)


def armed_label(backend_plan: BackendPlan) -> str:
    """What the reports of an armed worker's windows are named by: `slow` (windows opened by slow steps) or
    `on-demand` (asked for)."""
    return SLOW_LABEL if backend_plan.slow else ON_DEMAND_LABEL


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
        if SESSION_OPTION in config:
            # Armed for windows asked for: launched in a session of its own, named for this worker only.
            session = f"nrlprof-{os.urandom(6).hex()}"
            launch = {key: value for key, value in config.items() if key in LAUNCH_OPTIONS}
            launch[SESSION_OPTION] = session
            return {"_nsight": launch, "env_vars": {NSYS_SESSION_VARIABLE: session}}
        config.setdefault("o", layout.nsys_output_name(identity.file_name, steps_label(backend_plan.steps)))
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
        # Armed for nsys on demand: the worker's nsys session, the collections started in it, the one waiting.
        armed = SESSION_OPTION in backend_plan.options_dict and not self.in_workers_session
        self.nsys_session = os.environ.get(NSYS_SESSION_VARIABLE) or None if armed else None
        self.collections = 0
        self.collection_output: str | None = None
        # Why the reports of the window that closed last are not written yet (None: they are).
        self.written_later: str | None = None

    def ready_for_asked(self) -> None:
        """A window asked for opens at the next step: start its collection in this worker's nsys session."""
        if self.nsys_session is None or self.collection_output is not None:
            return
        nsys = shutil.which("nsys")
        if nsys is None:
            raise RuntimeError("nsys is not on this worker's PATH: no collection can start in its nsys session")
        self.collections += 1
        name = layout.nsys_output_name(self.role.identity.file_name, armed_label(self.backend_plan))
        name = name.replace("%p", str(os.getpid()))
        directory = Path(self.backend_plan.output_dir or layout.nsight_dir(self.role.session_dir or "."))
        directory.mkdir(parents=True, exist_ok=True)
        output = str(directory / f"{name}.{self.collections}")
        options = {k: v for k, v in self.backend_plan.options if k not in LAUNCH_OPTIONS}
        argv = [nsys, "start", f"--session={self.nsys_session}", "--capture-range=cudaProfilerApi",
                "--capture-range-end=stop", "-o", output, *option_words(options)]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, timeout=NSYS_START_TIMEOUT_S, check=False)
        if done.returncode != 0 and session_listed(self.nsys_session) is False:
            raise RuntimeError(gone_message(self.nsys_session))
        if done.returncode != 0:
            said = (done.stderr or done.stdout).strip().splitlines()
            raise RuntimeError(f"`nsys start` in session {self.nsys_session} failed ({done.returncode}): "
                               f"{said[-1] if said else 'no message'}")  # fmt: skip
        self.collection_output = output

    def _start_collection(self) -> None:
        try:
            self.ready_for_asked()
        except Exception as err:  # recorded, the window goes on without nsys
            self.capture_problem = str(err)

    @property
    def repeats(self) -> bool:
        return self.backend_plan.options_dict.get("capture-range-end", "stop").startswith("repeat")

    def start_window(self, window: Window, step: int) -> None:
        self.window, self.steps_seen, self.started_at, self.captures = window, [], time.time(), 0
        self.first_range = self.ranges_started + 1
        self.capture_problem = None
        if self.nsys_session is not None and self.collection_output is None and self.backend_plan.slow:
            self._start_collection()  # a window a slow step opened: nothing readied it ahead
        if not self.in_workers_session and self.role.identity is not None and not self.capture_problem:
            self.reports_before, self.last_window = set(self._session_reports()), window.label
        if self.nsys_session is not None and self.collection_output is None:
            self.capture_problem = self.capture_problem or (
                "no nsys collection was started in this worker's session for the window"
            )
        else:
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
        stopped_at = time.time()
        if not self.discrete and not problem:
            problem = cuda_profiler_api.stop()
        self.written_later = None if problem or self.in_workers_session else self._written_later()
        if problem:
            status = Status.NO_COLLECTION if self.nsys_session and self.collection_output is None else Status.NO_CUDA
            record = self.record([], status, problem)
        elif self.in_workers_session:
            record = self.record([], "ok", CHILD_NOTE.format(worker=self.role.parent.name))
        elif self.written_later is not None:
            record = self.record([], Status.PENDING, self.written_later)
        else:
            record = self._record_reports()
            if self.nsys_session is not None:  # what another process did to this worker's session, if anything
                record = disturbed(record, self.nsys_session, stopped_at)
        self.window = None
        self.collection_output = None
        return record

    def _written_later(self) -> str | None:
        """Why nsys has not written this window's reports yet: it keeps those of a `repeat` capture range until its
        last range ends (`repeat:K`) or the process exits (`repeat`), as nsys 2025.3 did on an H200."""
        if not self.repeats or self.role.identity is None or not self.captures:
            return None
        allowed = captures_allowed(self.backend_plan.options_dict["capture-range-end"], "capture-range-end")
        if allowed is not None and self.ranges_started >= allowed:
            return None
        ranges = ", ".join(str(k) for k in self._window_ranges())
        when = ("when this worker's process exits (an unbounded `repeat`)" if allowed is None else
                f"when capture range {allowed} of `repeat:{allowed}` ends")  # fmt: skip
        output = self._output()
        pid = " (%p: the pid of the process nsys launched)" if "%p" in output else ""
        return f"nsys writes this window's report(s) {output}.<{ranges}>.nsys-rep {when}{pid}"

    def complete_child_record(self, record: WindowRecord) -> WindowRecord:
        """A child's record of the window that just closed here: the report of this session that holds it."""
        if record.window != self.last_window or record.status not in (Status.OK, Status.LATE):
            return record
        if self.written_later is not None:
            return record.replaced(status=Status.PENDING, message=self.written_later)
        deadline = time.monotonic() + REPORT_WAIT_S
        while not (new := self._new_window_reports()) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not new:
            missing = f"no report of this nsys session appeared within {REPORT_WAIT_S:.0f} s of the window's end"
            return record.replaced(status=Status.MISSING, message=missing)
        return record.replaced(files=tuple(str(p) for p in new))

    def _new_window_reports(self) -> list[Path]:
        """This window's reports written since it started (`repeat:K` writes the earlier windows' with the last)."""
        reports = self._reports() if self.repeats else self._session_reports()
        return [p for p in reports if p not in self.reports_before]

    def _record_reports(self) -> WindowRecord:
        """The reports of this window's capture ranges that exist; what is missing, said."""
        expected = self.captures
        found, unfinished = self._reports(), []
        deadline = time.monotonic() + REPORT_WAIT_S
        while self.role.identity is not None and len(found) < expected and time.monotonic() < deadline:
            unfinished = self._session_files(layout.nsys_unfinished)
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
            return self.record(files + [str(p) for p in unfinished], Status.IMPORT_FAILED, message)
        message = f"{expected - len(found)} of {expected} nsys report(s) not found after {REPORT_WAIT_S:.0f} s"
        return self.record(files, Status.MISSING, message)

    def _session_reports(self) -> list[Path]:
        """Every report this process's nsys session has written so far."""
        return self._session_files(layout.nsys_reports)

    def _session_files(self, find: Callable[[str, int], list[Path]]) -> list[Path]:
        """`find(output name, pid)` for the process nsys launched: this one or the first ancestor with files."""
        output = self._output()
        for pid in _ancestor_pids() if "%p" in output else [os.getpid()]:
            found = find(output, pid)
            if found:
                return found
        return []

    def _output(self) -> str:
        if self.collection_output is not None:
            return self.collection_output
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
