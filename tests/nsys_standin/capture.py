"""One `nsys profile` run: launch the command as a child, serve its cudaProfilerStart/Stop, write reports.

Every process of the run (the one launched and those it starts, which inherit the fake CUDA runtime and its
socket) is traced by this one session. A capture range belongs to one CUDA context, so each process opens and
closes its own: the session captures while any process has its range open, from the first start to the stop
that closes the last open range, and writes one report of every process per such capture. A process that dies
with its range open (its context destroyed) closes it then; only the launched process's death inside a range
loses the capture, as it ends the session.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from nsys_standin import build
from nsys_standin.calls import record_call
from nsys_standin.nvtx_events import NvtxCollector
from nsys_standin.options import ProfileOptions, expand_output
from nsys_standin.report import FORMAT, write_atomically

CUDA_SUCCESS = 0
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
WORKDIR_PREFIX = "nsys-standin-"


def remove_stale_workdirs() -> None:
    """Work dirs of stand-ins that were killed (Ray's teardown uses SIGKILL) and could not clean up."""
    for path in Path(tempfile.gettempdir()).glob(f"{WORKDIR_PREFIX}*-*"):
        owner = path.name.removeprefix(WORKDIR_PREFIX).partition("-")[0]
        if owner.isdecimal() and not Path(f"/proc/{owner}").exists():
            shutil.rmtree(path, ignore_errors=True)


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _alive(pid: int) -> bool:
    """The process runs (a zombie's CUDA context is gone with it)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


class CaptureSession:
    subcommand = "profile"

    def __init__(self, options: ProfileOptions, version: str) -> None:
        self.options, self.version = options, version
        self.capture_range = options.capture_range
        self.end_kind, self.end_count = options.range_end
        self.kill_signal = options.kill_signal
        self.force_overwrite = options.force_overwrite
        self.lock = threading.Lock()
        self.open_range: dict | None = None
        # Per process (pid): its own capture range while open; the closed ones of the session's open capture.
        self.process_ranges: dict[int, dict] = {}
        self.closed_ranges: list[dict] = []
        self.ranges_done = 0
        # Ranges of a `repeat` whose reports nsys writes later: at the last of `repeat:K`, else at exit.
        self.unwritten: list[tuple[str, dict]] = []
        self.finished = False
        self.sent_signals: set[int] = set()
        self.workdir = Path(tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-"))
        self.nvtx = NvtxCollector(self.workdir / "nvtx")
        self.child: subprocess.Popen | None = None
        self.name = ""

    # --- launch and wait ------------------------------------------------------------------------------------

    def run(self) -> int:
        remove_stale_workdirs()
        try:
            return self._run()
        finally:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def _run(self) -> int:
        if not self.options.command:
            say("nsys stand-in: no application to launch")
            return 1
        if "%" not in self.options.output and not self.force_overwrite:
            existing = Path(self.options.output + ".nsys-rep")
            if existing.exists():
                say(f"ERROR: the report {existing} already exists. Use --force-overwrite=true to overwrite it.")
                return 1
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(self.workdir / "s"))
        listener.listen(64)
        self.session_start_ns, self.session_start_utc_ns = time.monotonic_ns(), time.time_ns()
        try:
            self.child = subprocess.Popen(self.options.command, env=self._child_env())
        except OSError as error:
            say(f"nsys stand-in: cannot launch {self.options.command[0]!r}: {error}")
            return 1
        self.name = expand_output(self.options.output, self.child.pid)
        self._record_call()
        for number in FORWARDED_SIGNALS:
            signal.signal(number, self._forward)
        if self.capture_range == "none":
            self.open_range = self._new_range("launch", None, self.session_start_ns)
        threading.Thread(target=self._serve, args=(listener,), daemon=True).start()
        code = self.child.wait()
        self._at_exit(code)
        listener.close()
        return 128 - code if code < 0 else code

    def _child_env(self) -> dict[str, str]:
        libraries = build.library_dir()
        env = {**os.environ, **self.options.env_vars()}
        env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(libraries), env.get("LD_LIBRARY_PATH")]))
        env["NRLPROF_STANDIN_SOCKET"] = str(self.workdir / "s")
        if self.options.traces_nvtx:
            (self.workdir / "nvtx").mkdir()
            env["NVTX_INJECTION64_PATH"] = str(libraries / "libnvtx_standin_injection.so")
            env["NRLPROF_STANDIN_NVTX_DIR"] = str(self.workdir / "nvtx")
        return env

    def _record_call(self) -> None:
        record_call("nsys", self.options.options, self.options.command, self.child.pid, nsys_pid=os.getpid(),
                    subcommand=self.subcommand)  # fmt: skip

    def _forward(self, number: int, _frame) -> None:
        if self.child is not None and self.child.poll() is None:
            self.sent_signals.add(number)
            with contextlib.suppress(ProcessLookupError):  # it exited meanwhile (the handler runs inside its wait)
                os.kill(self.child.pid, number)

    def _at_exit(self, code: int) -> None:
        with self.lock:
            if self.open_range is None:
                self._write_unwritten()
                return
            self._close_process_ranges(time.monotonic_ns(), "exit", list(self.process_ranges))
            if code < 0 and -code not in self.sent_signals:
                say(f"nsys stand-in: the application was killed by signal {-code} inside a capture range; "
                    "its data is lost, no report written")  # fmt: skip
                self._write_unwritten()
            else:
                self._finish_range(time.monotonic_ns(), "exit", None)
            self.open_range = None

    # --- cudaProfilerStart/Stop -----------------------------------------------------------------------------

    def _serve(self, listener: socket.socket) -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection: socket.socket) -> None:
        with connection:
            request = b""
            while not request.endswith(b"\n"):
                chunk = connection.recv(256)
                if not chunk:
                    return
                request += chunk
            verb, pid, tid, at = request.decode().split()
            caller = {"pid": int(pid), "tid": int(tid)}
            shutdown = self.start(caller, int(at)) if verb == "start" else self.stop(caller, int(at))
            connection.sendall(f"{CUDA_SUCCESS}\n".encode())
        if shutdown and self.kill_signal is not None and self.child.poll() is None:
            self.sent_signals.add(self.kill_signal)
            os.kill(self.child.pid, self.kill_signal)

    def start(self, caller: dict, at: int) -> bool:
        """The caller's process opens its range (once; again is a no-op); the first one open starts a capture."""
        with self.lock:
            if self.capture_range != "cudaProfilerApi" or self.finished or caller["pid"] in self.process_ranges:
                return False
            if self.open_range is None:
                self.open_range = self._new_range("cudaProfilerStart", caller, at)
            self.process_ranges[caller["pid"]] = {"pid": caller["pid"], "start_ns": at}
        return False

    def stop(self, caller: dict, at: int) -> bool:
        """Close the caller's range; when none stays open, write the capture's report before answering.

        True when nsys now shuts the app down. A process with no range open: no effect.
        """
        with self.lock:
            if self.capture_range != "cudaProfilerApi" or self.open_range is None or self.end_kind == "none":
                return False
            if caller["pid"] not in self.process_ranges:
                return False
            self._close_process_ranges(at, "cudaProfilerStop", [caller["pid"]])
            self._close_process_ranges(at, "exit", [pid for pid in self.process_ranges if not _alive(pid)])
            if self.process_ranges:
                return False
            self._finish_range(at, "cudaProfilerStop", caller)
            self.open_range = None
            self.ranges_done += 1
            repeating = self.end_kind.startswith("repeat")
            self.finished = not repeating or (self.end_count is not None and self.ranges_done >= self.end_count)
            return self.finished and self.end_kind.endswith("shutdown")

    def _close_process_ranges(self, at: int, stopped_by: str, pids: list[int]) -> None:
        for pid in pids:
            opened = self.process_ranges.pop(pid)
            self.closed_ranges.append({**opened, "stop_ns": at, "stopped_by": stopped_by})

    def _new_range(self, started_by: str, caller: dict | None, at: int) -> dict:
        return {"started_by": started_by, "start_caller": caller, "start_ns": at}

    # --- reports ----------------------------------------------------------------------------------------------

    def _finish_range(self, stop_ns: int, stopped_by: str, caller: dict | None) -> None:
        """The range's report: written now, or kept for later as nsys keeps those of a `repeat` that goes on."""
        index = self.ranges_done + 1 if self.end_kind.startswith("repeat") else None
        base = self.name if index is None else f"{self.name}.{index}"
        self.unwritten.append((base, self._document(index, stop_ns, stopped_by, caller)))
        last = self.end_count is not None and self.ranges_done + 1 >= self.end_count
        if not self.end_kind.startswith("repeat") or last or stopped_by == "exit":
            self._write_unwritten()

    def _write_unwritten(self) -> None:
        unwritten, self.unwritten = self.unwritten, []
        for base, document in unwritten:
            self._write_report(base, document)

    def _document(self, index: int | None, stop_ns: int, stopped_by: str, caller: dict | None) -> dict:
        opened = self.open_range
        document = {
            "format": FORMAT,
            "nsys_version": self.version,
            "name": self.name,
            "range_index": index,
            "launched_pid": self.child.pid,
            "command": self.options.command,
            "options": self.options.options,
            "capture_range": self.capture_range,
            "capture_range_end": self.options.values.get("capture-range-end", "stop-shutdown"),
            "session_start_ns": self.session_start_ns,
            "session_start_utc_ns": self.session_start_utc_ns,
            **opened,
            "stop_ns": stop_ns,
            "stopped_by": stopped_by,
            "stop_caller": caller,
            "process_ranges": sorted(self.closed_ranges, key=lambda r: (r["start_ns"], r["pid"])),
            **self.nvtx.take(opened["start_ns"], stop_ns),
        }
        self.closed_ranges = []
        return document

    def _write_report(self, base: str, document: dict) -> None:
        qdstrm, report = Path(base + ".qdstrm"), Path(base + ".nsys-rep")
        qdstrm.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(qdstrm, json.dumps(document))
        say(f"Generating '{qdstrm}'")
        delay = float(os.environ.get("NRLPROF_STANDIN_STOP_DELAY_S", "0") or 0)
        if delay > 0:
            time.sleep(delay)
        if os.environ.get("NRLPROF_STANDIN_IMPORT_FAIL", "") not in ("", "0"):
            say("Importer error status: Importation failed.")
            say(f"Failed to create '{report}': the capture remains in '{qdstrm}'.")
            return
        if report.exists() and not self.force_overwrite:
            say(f"ERROR: the report {report} already exists. Use --force-overwrite=true to overwrite it.")
            return
        write_atomically(report, json.dumps(document, indent=1))
        qdstrm.unlink()
        say(f"Generated:\n    {report.resolve()}")
