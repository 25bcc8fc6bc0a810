"""`nsys launch`, `nsys start`, `nsys stop`: interactive sessions, as Nsight Systems 2025.3 runs them on a GPU.

- `nsys launch --session-new=NAME [-t ...] CMD` launches CMD with nsys's libraries injected and collects nothing:
  the application's cudaProfilerStart/Stop have no effect until a collection is started in the session.
- `nsys start --session=NAME [-c cudaProfilerApi] [--capture-range-end=stop] -o OUT` starts a collection: at once,
  or with `-c cudaProfilerApi` from the application's next cudaProfilerStart to its cudaProfilerStop. The report
  `OUT.nsys-rep` is written when the collection ends, and that cudaProfilerStop returns once it is; the session then
  collects nothing until the next `nsys start`. A start while a collection runs or waits for its range is refused.
- `nsys stop --session=NAME` ends the collection now and writes its report (none when its range never began).
- `start`/`stop` for a session that does not run print an error and exit 1.
- `nsys sessions list [--show-header=true|false]` prints a row per session (`ID TIME STATE LAUNCH NAME`, the name
  last); `nsys shutdown --session=NAME` ends the session: a collection in it ends with no report, the application
  runs on uncollected, and the session is no longer listed (a teardown sweep that stops every session does these).

Seen on an H200 with nsys 2025.3.1: `nsys start` took 0.10 s (0.22-0.27 s without `-c`, and then it returned before
collecting: the first step's kernels were missing), each report was complete 0.2 s after its cudaProfilerStop
returned (2.8 s), and two windows gave two reports while the application ran.

The launch process serves its session on a Unix socket `<tmp>/nrlprof-nsys-sessions-<uid>/<NAME>`; `start` and
`stop` send it one line (`start <options as JSON>` / `stop`) and print its answer.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

from nsys_standin.calls import record_call
from nsys_standin.capture import CaptureSession, say
from nsys_standin.options import ProfileOptions, UsageError, expand_output, split_profile
from nsys_standin.profile_help import LONG_NAMES, refusal, unknown_option

IDLE = "idle"
START_OPTIONS = ("capture-range", "capture-range-end", "output", "force-overwrite")


def sessions_dir() -> Path:
    return Path(tempfile.gettempdir()) / f"nrlprof-nsys-sessions-{os.getuid()}"


class LaunchedSession(CaptureSession):
    """`nsys launch`: the application runs injected; collections come and go with `nsys start` / `nsys stop`."""

    subcommand = "launch"

    def __init__(self, options: ProfileOptions, version: str, name: str) -> None:
        super().__init__(options, version)
        self.session_name = name
        self.capture_range = IDLE
        self.control = sessions_dir() / name

    def _run(self) -> int:
        sessions_dir().mkdir(mode=0o700, exist_ok=True)
        if self.control.exists():
            say(f"Error: a session named '{self.session_name}' already exists.")
            return 1
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(self.control))
        server.listen(16)
        threading.Thread(target=self._serve_control, args=(server,), daemon=True).start()
        try:
            return super()._run()
        finally:
            server.close()
            self.control.unlink(missing_ok=True)

    def _serve_control(self, server: socket.socket) -> None:
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            with connection:
                line = connection.makefile("r").readline().strip()
                verb, _, text = line.partition(" ")
                if verb == "shutdown":
                    self.shut_down(server)
                    connection.sendall(b"0 \n")
                    return
                code, message = self.begin(json.loads(text or "{}")) if verb == "start" else self.end()
                connection.sendall(f"{code} {message}\n".encode())

    def begin(self, values: dict[str, str]) -> tuple[int, str]:
        """`nsys start`: a collection now, or armed for the application's next capture range."""
        with self.lock:
            if self.capture_range != IDLE:
                return 1, f"Error: a collection is already active in session '{self.session_name}'."
            capture_range = values.get("capture-range", "none")
            end = values.get("capture-range-end", "stop")
            if capture_range not in ("none", "cudaProfilerApi") or end not in ("stop", "none"):
                return 1, f"Error: the stand-in's start supports -c none|cudaProfilerApi and stop|none, not {values}"
            self.name = expand_output(values.get("output", "report%n"), self.child.pid)
            self.force_overwrite = values.get("force-overwrite", "false") in ("true", "1")
            self.capture_range, self.end_kind, self.end_count = capture_range, end, None
            self.finished, self.ranges_done = False, 0
            if capture_range == "none":
                self.open_range = self._new_range("nsys start", None, time.monotonic_ns())
            return 0, ""

    def end(self) -> tuple[int, str]:
        """`nsys stop`: the collection ends now; its report is written before the answer."""
        with self.lock:
            if self.capture_range == IDLE:
                return 1, f"Error: no collection is active in session '{self.session_name}'."
            if self.open_range is not None:
                now = time.monotonic_ns()
                self._close_process_ranges(now, "nsys stop", list(self.process_ranges))
                self._finish_range(now, "nsys stop", None)
                self.open_range = None
            self.capture_range = IDLE
            return 0, ""

    def shut_down(self, server: socket.socket) -> None:
        """`nsys shutdown`: the collection ends unwritten, and the session goes."""
        with self.lock:
            self.open_range = None
            self.capture_range = IDLE
        self.control.unlink(missing_ok=True)
        server.close()

    def stop(self, caller: dict, at: int) -> bool:
        shutdown = super().stop(caller, at)
        with self.lock:
            if self.finished:  # the range of `-c cudaProfilerApi --capture-range-end=stop` ended the collection
                self.capture_range = IDLE
        return shutdown


def parsed(verb: str, argv: list[str], takes_command: bool) -> ProfileOptions | None:
    """The options of `nsys <verb>`, or None once nsys's refusal is printed."""
    try:
        options = split_profile(argv)
    except UsageError as error:
        say(f"nsys stand-in: {error}")
        return None
    unknown = unknown_option(options.options, LONG_NAMES)
    if unknown is None and options.command and not takes_command:
        unknown = options.command[0]
    if unknown is not None:
        print(refusal(unknown).replace("nsys profile", f"nsys {verb}"), end="", file=sys.stderr)
        return None
    return options


def launch(argv: list[str], version: str) -> int:
    options = parsed("launch", argv, takes_command=True)
    if options is None:
        return 1
    name = options.values.get("session-new")
    if not name:
        say("nsys stand-in: launch needs --session-new=NAME (the stand-in has no default session)")
        return 1
    return LaunchedSession(options, version, name).run()


def list_sessions(argv: list[str]) -> int:
    """`nsys sessions list`: one row per session that runs, its name last."""
    header = "--show-header=false" not in argv
    rows = sorted(p.name for p in sessions_dir().glob("*")) if sessions_dir().is_dir() else []
    if header:
        print(" ID   TIME     STATE     LAUNCH  NAME")
    for index, name in enumerate(rows, 1):
        print(f" {index:<4} 00:00:01 Running   {index:<7} {name}")
    return 0


def control(verb: str, argv: list[str]) -> int:
    """`nsys start` / `nsys stop` / `nsys shutdown` for the session `--session=NAME`."""
    options = parsed(verb, argv, takes_command=False)
    if options is None:
        return 1
    name = options.values.get("session", "")
    path = sessions_dir() / name
    if not name or not path.exists():
        say(f"Error: the session '{name}' was not found.")
        return 1
    values = {key: options.values[key] for key in START_OPTIONS if key in options.values}
    record_call("nsys", options.options, [], os.getppid(), nsys_pid=os.getpid(), subcommand=verb)
    line = f"start {json.dumps(values)}\n" if verb == "start" else f"{verb}\n"
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.connect(str(path))
            connection.sendall(line.encode())
            answer = connection.makefile("r").readline()
    except OSError as error:
        say(f"Error: the session '{name}' did not answer: {error}")
        return 1
    code, _, message = answer.strip().partition(" ")
    if message:
        say(message)
    return int(code or 1)
