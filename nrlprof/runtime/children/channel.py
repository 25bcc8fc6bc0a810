"""A worker's channel to the Python processes it starts: they register, and window actions reach them.

The worker listens on an abstract Unix socket (no file; it goes with the worker; a peer of another user is
refused) named in NRLPROF_CHANNEL, which its children inherit, with the start-up hook that makes them join
(`nrlprof/runtime/children/site`, first on PYTHONPATH; `open_children`). A thread accepts them; window actions are sent
by the thread that runs them to every live child at once, and their answers awaited together, up to
NRL_PROFILE_TIMEOUT_S. A child that misses that is late for the rest of the window: later actions still reach
it, flagged late, and are not waited on. A child whose connection closes during a window exited or was killed:
the worker writes its record (`exited`), and nothing else is lost.

In an armed job (NRL_PROFILE_ON_DEMAND) every Ray worker listens, matched or not: a window asked for gives the
worker a backend it may not have had, and `enable` gives it to the children before the window's first action
(children that register later get it as they register).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import selectors
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from nrlprof.config.variables import CHANNEL_VARIABLE
from nrlprof.log import logger
from nrlprof.manifest import WindowRecord
from nrlprof.process import patches
from nrlprof.runtime.children.protocol import (
    READ_SIZE,
    LineReader,
    actions_message,
    encode,
    peer_ids,
    socket_address,
)
from nrlprof.runtime.windows.profiler import SETTLE, START, STEP, STOP, Action

if TYPE_CHECKING:
    from nrlprof.runtime.session import Session

LISTEN_BACKLOG = 128
ENVIRONMENT_PATCH = "os.environ[PYTHONPATH, NRLPROF_CHANNEL] (nrlprof children)"
SITE_DIR = Path(__file__).resolve().parent / "site"


@dataclass
class OpenWindow:
    window: str
    steps: list[int]
    started_at: float


@dataclass(eq=False)
class ChildProcess:
    """One registered child, as the worker knows it."""

    pid: int
    connection: socket.socket
    name: str = ""
    owed: int = 0
    late: bool = False
    reader: LineReader = field(default_factory=LineReader)
    windows: dict[str, OpenWindow] = field(default_factory=dict)
    # Backends stopped since the child last settled: their files may still be being finished.
    stopped: set[str] = field(default_factory=set)
    dead: bool = False


@dataclass
class Posting:
    """Actions sent to children: the ones waited for, and when waiting ends."""

    actions: tuple[Action, ...]
    deadline: float
    waited: list[ChildProcess]
    records: list[dict] = field(default_factory=list)


class ChildChannel:
    """`worker_name`, `rank`, `write`: who the worker is, and how the records of children lost in a window are
    written; an unmatched worker of an armed job learns them at its first window asked for (`bind`)."""

    def __init__(
        self,
        worker_name: str,
        rank: int,
        node_ip: str,
        timeout_s: float,
        write: Callable[[WindowRecord], None] | None,
    ) -> None:
        self.bind(worker_name, rank, node_ip, write)
        self.timeout_s = timeout_s
        self.address = f"@nrlprof-{os.getpid()}-{secrets.token_hex(6)}"
        self._children: list[ChildProcess] = []
        # `enable` lines sent so far, in order: a child that registers later gets them first.
        self._enables: list[bytes] = []
        self._lock = threading.Lock()
        # Held while actions are out: a child ended by another thread (`release`) waits for their answers.
        self.acting = threading.RLock()
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(socket_address(self.address))
        self._listener.listen(LISTEN_BACKLOG)
        self._thread = threading.Thread(target=self._accept, name="nrlprof-children", daemon=True)
        self._thread.start()

    def bind(self, worker_name: str, rank: int, node_ip: str, write: Callable[[WindowRecord], None] | None) -> None:
        self.worker_name = worker_name
        self.rank = rank
        self.node_ip = node_ip
        self.write = write

    @property
    def bound(self) -> bool:
        return self.write is not None

    def __len__(self) -> int:
        return len(self._children)

    def children(self) -> tuple[ChildProcess, ...]:
        with self._lock:
            return tuple(self._children)

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return
            try:
                pid, uid = peer_ids(connection)
                if uid != os.getuid():
                    connection.close()
                    continue
                with self._lock:
                    connection.settimeout(self.timeout_s)
                    for line in self._enables:
                        connection.sendall(line, socket.MSG_NOSIGNAL)
                    connection.setblocking(False)
                    self._children.append(ChildProcess(pid, connection))
            except OSError:
                connection.close()
                continue

    def enable(self, backend: dict) -> None:
        """The children add a backend for windows asked for (`protocol.enable_message`), before the first action of
        the window reaches them: lines on a connection are read in order. Nothing is waited for."""
        line = encode({"enable": backend})
        with self._lock:
            self._enables.append(line)
            children = tuple(self._children)
        with self.acting:
            posting = Posting((), time.monotonic() + self.timeout_s, [])
            for child in children:
                self._send(child, line, posting)

    # --- window actions ---------------------------------------------------------------------------------------

    def post(self, actions: tuple[Action, ...], only: tuple[ChildProcess, ...] | None = None) -> Posting:
        """Send the actions to every live child now (or `only` to those); `collect` waits for the answers."""
        deadline = time.monotonic() + self.timeout_s
        posting = Posting(actions, deadline, [], self._answered_meanwhile())
        if any(a.op == START for a in actions):
            for child in self.children():
                child.late = child.owed > 0  # a new window: only children still busy stay late
        plain = actions_message(actions, deadline)
        flagged = actions_message(tuple(replace(a, late=True) for a in actions), deadline)
        for child in self.children() if only is None else only:
            if not self._send(child, flagged if child.late else plain, posting):
                continue
            child.owed += 1
            self._follow(child, actions)
            if not child.late:
                posting.waited.append(child)
        return posting

    def _send(self, child: ChildProcess, message: bytes, posting: Posting) -> bool:
        """The whole line, or nothing: a child that cannot take it by the deadline is let go (it fell far behind)."""
        view = memoryview(message)
        while view:
            try:
                view = view[child.connection.send(view, socket.MSG_NOSIGNAL) :]
            except BlockingIOError:
                if not _writable(child.connection, posting.deadline):
                    self._fell_behind(child, posting.actions)
                    if len(view) < len(message):
                        logger.warning("child process '%s' (pid %d) no longer joins windows: it fell behind",
                                       self._name(child), child.pid)  # fmt: skip
                        self._forget(child)
                    return False
            except OSError:
                posting.records += self._lost(child)
                return False
        return True

    def _follow(self, child: ChildProcess, actions: tuple[Action, ...]) -> None:
        """What the child has open, as far as the actions sent say (its answers say it for sure)."""
        for action in actions:
            if action.op == START:
                child.windows[action.kind] = OpenWindow(action.window.label, [action.step], time.time())
            elif action.op == STEP and action.kind in child.windows:
                child.windows[action.kind].steps.append(action.step)
            elif action.op == STOP:
                child.windows.pop(action.kind, None)
                child.stopped.add(action.kind)
            elif action.op == SETTLE:
                child.stopped.discard(action.kind)

    def collect(self, posting: Posting) -> list[dict]:
        """The records the children answered with, waiting for each one sent to until the deadline."""
        records = posting.records
        waiting = {c for c in posting.waited if not c.dead and c.owed}
        with selectors.DefaultSelector() as selector:
            for child in self.children():
                if child.owed and not child.dead:
                    selector.register(child.connection, selectors.EVENT_READ, child)
            while waiting and (remaining := posting.deadline - time.monotonic()) > 0:
                for key, _ in selector.select(remaining):
                    child = key.data
                    records += self._read(child)
                    if child.dead or not child.owed:
                        selector.unregister(child.connection)
                        waiting.discard(child)
            for key, _ in selector.select(0):  # answers of late children that came meanwhile
                records += self._read(key.data)
        for child in waiting:
            if not child.dead:
                self._fell_behind(child, posting.actions)
        return records

    def _answered_meanwhile(self) -> list[dict]:
        """What late children answered since the last actions, read without waiting."""
        owing = [c for c in self.children() if c.owed and not c.dead]
        if not owing:
            return []
        records: list[dict] = []
        with selectors.DefaultSelector() as selector:
            for child in owing:
                selector.register(child.connection, selectors.EVENT_READ, child)
            for key, _ in selector.select(0):
                records += self._read(key.data)
        return records

    def _read(self, child: ChildProcess) -> list[dict]:
        try:
            data = child.connection.recv(READ_SIZE)
        except BlockingIOError:
            return []
        except OSError:
            data = b""
        if not data:
            return self._lost(child)
        records: list[dict] = []
        for message in child.reader.feed(data):
            if "hello" in message:
                child.name = child.name or str(message["hello"].get("name") or "")
                continue
            child.owed = max(0, child.owed - 1)
            child.name = str(message.get("name") or child.name)
            open_kinds = set(message.get("open") or ())
            for kind in set(child.windows) - open_kinds:
                del child.windows[kind]
            records += [r for r in message.get("records") or () if isinstance(r, dict)]
        return records

    def _fell_behind(self, child: ChildProcess, actions: tuple[Action, ...]) -> None:
        if child.late:
            return
        child.late = True
        logger.warning(
            "child process '%s' (pid %d) of worker '%s' did not answer %s within %.0f s (NRL_PROFILE_TIMEOUT_S): it "
            "is busy; not waited on again in this window, and its record will say 'late'",
            self._name(child),
            child.pid,
            self.worker_name,
            "/".join(f"{a.kind} {a.op}" for a in actions),
            self.timeout_s,
        )

    def _forget(self, child: ChildProcess) -> None:
        child.dead = True
        with self._lock:
            if child in self._children:
                self._children.remove(child)
        child.connection.close()

    def _lost(self, child: ChildProcess) -> list[dict]:
        """The child's connection closed: it exited or was killed. Its open windows' records say so."""
        self._forget(child)
        records = []
        for kind, window in child.windows.items():
            record = WindowRecord(
                backend=kind,
                worker=self._name(child),
                rank=self.rank,
                steps=window.steps,
                window=window.window,
                status="exited",
                message=f"the process (pid {child.pid}) exited or was killed during the window: its file of this "
                "window is lost",
                node_ip=self.node_ip,
                pid=child.pid,
                started_at=window.started_at,
            )
            if self.write is not None:
                self.write(record)
            records.append(asdict(record))
        if child.windows:
            logger.warning(
                "child process '%s' (pid %d) of worker '%s' exited during a window: its files of the window are lost",
                self._name(child),
                child.pid,
                self.worker_name,
            )
        child.windows.clear()
        return records

    def _name(self, child: ChildProcess) -> str:
        return child.name or f"{self.worker_name}.pid{child.pid}"

    def release(self, pid: int) -> list[dict]:
        """The worker is about to end the child of this pid: its open windows close first, and its files are
        finished (nrlprof.process.finishing) before it goes."""
        with self.acting:
            child = next((c for c in self.children()
                          if c.pid == pid and (c.windows or c.stopped) and not c.dead), None)  # fmt: skip
            if child is None:
                return []
            stops = [Action(kind, STOP) for kind in child.windows]
            settles = [Action(kind, SETTLE) for kind in sorted({*child.windows, *child.stopped})]
            return self.collect(self.post((*stops, *settles), only=(child,)))

    # --- closing ----------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop listening and let every child go (their windows stay as they are)."""
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self.close_inherited()

    def close_inherited(self) -> None:
        """In a process forked from the worker: drop the copies of the worker's sockets, touching nothing else."""
        self._listener.close()
        with self._lock:
            children, self._children = self._children, []
        for child in children:
            child.connection.close()


def _writable(connection: socket.socket, deadline: float) -> bool:
    with selectors.DefaultSelector() as selector:
        selector.register(connection, selectors.EVENT_WRITE)
        return bool(selector.select(max(0.0, deadline - time.monotonic())))


# --- what the worker's children inherit ------------------------------------------------------------


def open_children(session: Session) -> None:
    """In a matched worker: listen for the processes it will start, and make them find the channel (processes
    forked from the worker are joined by nrlprof.runtime.children.join's fork handler, which the activation
    installs)."""
    process = session.process
    channel = ChildChannel(
        session.identity.name, session.identity.rank, process.role.node_ip, session.plan.timeout_s,
        process.write_manifest,
    )  # fmt: skip
    session.children = channel
    info = {"address": channel.address, "session_dir": process.role.session_dir, "node_ip": process.role.node_ip}
    patches.install_undoable(ENVIRONMENT_PATCH, lambda: _children_environment(json.dumps(info)))


def open_unbound_children(session: Session) -> None:
    """In a Ray worker of an armed job that no pattern matched: listen for the processes it will start, as a
    matched worker does; who the worker is, its Ray session and node come with its first window asked for. A
    channel the session has already (the session was reconfigured) is named to the children again."""
    channel = session.children
    if not isinstance(channel, ChildChannel):
        channel = ChildChannel("", 0, "", session.plan.timeout_s, None)
        session.children = channel
    info = {"address": channel.address}
    patches.install_undoable(ENVIRONMENT_PATCH, lambda: _children_environment(json.dumps(info)))


def _children_environment(channel_info: str) -> Callable[[], None]:
    """NRLPROF_CHANNEL set and the start-up hook first on PYTHONPATH; returns what puts both back."""
    saved = {name: os.environ.get(name) for name in (CHANNEL_VARIABLE, "PYTHONPATH")}
    os.environ[CHANNEL_VARIABLE] = channel_info
    site_dir = str(SITE_DIR)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [site_dir, saved["PYTHONPATH"]]))

    def restore() -> None:
        for name, value in saved.items():
            if name == "PYTHONPATH" and os.environ.get(name, "").split(os.pathsep)[:1] != [site_dir]:
                entries = [e for e in os.environ.get(name, "").split(os.pathsep) if e != site_dir]
                value = os.pathsep.join(entries) or None
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    return restore
