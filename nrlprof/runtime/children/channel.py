"""A worker's channel to the Python processes it starts: an abstract Unix socket named in NRLPROF_CHANNEL (a peer of
another user is refused), which carries the worker's fan-out of window actions to them (nrlprof.runtime.windows.fanout)
and, in an armed job, the backend of a window asked for (`enable`, also to children that register later)."""

from __future__ import annotations

import contextlib
import os
import secrets
import selectors
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from nrlprof import wire
from nrlprof.config.variables import CHANNEL_VARIABLE
from nrlprof.log import logger
from nrlprof.manifest import WindowRecord
from nrlprof.process import patches
from nrlprof.runtime.children.protocol import (
    READ_SIZE,
    Actions,
    ChannelInfo,
    Enable,
    Hello,
    LineReader,
    encode,
    peer_ids,
    socket_address,
)
from nrlprof.runtime.windows.deaths import child_gone_record
from nrlprof.runtime.windows.fanout import BEHIND, Answer, Fanout, Gone, OpenWindow, Peer, Posting
from nrlprof.runtime.windows.profiler import SETTLE, STOP, Action

if TYPE_CHECKING:
    from nrlprof.config.plan import Plan
    from nrlprof.runtime.windows.profiler import ProcessProfiler

LISTEN_BACKLOG = 128
ENVIRONMENT_PATCH = "os.environ[PYTHONPATH, NRLPROF_CHANNEL] (nrlprof children)"
SITE_DIR = Path(__file__).resolve().parent / "site"
# Why a child is let go: it could not take a whole line of actions by the deadline.
FELL_BEHIND = "fell behind"


@dataclass(eq=False)
class ChildProcess:
    """One registered child, as the worker knows it."""

    pid: int
    connection: socket.socket
    name: str = ""
    reader: LineReader = field(default_factory=LineReader)


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
        self.fanout = Fanout(self, timeout_s)
        self.bind(worker_name, rank, node_ip, write)
        self.address = f"@nrlprof-{os.getpid()}-{secrets.token_hex(6)}"
        self._peers: list[Peer] = []
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
        self.fanout.write = write

    @property
    def bound(self) -> bool:
        return self.fanout.write is not None

    @property
    def timeout_s(self) -> float:
        return self.fanout.timeout_s

    def __len__(self) -> int:
        return len(self._peers)

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
                    self._peers.append(Peer(ChildProcess(pid, connection)))
            except OSError:
                connection.close()
                continue

    def enable(self, backend: Enable) -> None:
        """The children add a backend for windows asked for, before the first action of the window reaches them:
        lines on a connection are read in order. Nothing is waited for."""
        line = encode(backend)
        with self._lock:
            self._enables.append(line)
            peers = tuple(self._peers)
        with self.acting:
            deadline = time.monotonic() + self.timeout_s
            for peer in peers:
                sent = self._send(peer, line, deadline)
                if isinstance(sent, Gone):
                    self.fanout.gone(peer, sent)

    def release(self, pid: int) -> Posting | None:
        """The worker is about to end the child of this pid: its open windows close first, and its files are
        finished (nrlprof.process.finishing) before it goes."""
        with self.acting:
            peer = next((p for p in self.peers() if p.link.pid == pid), None)
            if peer is None:
                return None
            open_kinds = peer.sent_windows()
            kinds = sorted(open_kinds | peer.finishing)
            if not kinds:
                return None
            stops = [Action(kind, STOP) for kind in sorted(open_kinds)]
            return self.fanout.release(peer, (*stops, *(Action(kind, SETTLE) for kind in kinds)), forget=False)

    # --- the fan-out's transport ----------------------------------------------------------------------------

    def peers(self) -> tuple[Peer, ...]:
        with self._lock:
            return tuple(self._peers)

    def describe(self, peer: Peer) -> str:
        return f"child process '{self._name(peer)}' (pid {peer.link.pid}) of worker '{self.worker_name}'"

    def send(self, peer: Peer, actions: tuple[Action, ...], deadline: float) -> object:
        return self._send(peer, encode(Actions(actions, deadline)), deadline)

    def _send(self, peer: Peer, message: bytes, deadline: float) -> object:
        """The whole line, or nothing: a child that cannot take it by the deadline is let go (it fell far behind)."""
        connection = peer.link.connection
        view = memoryview(message)
        while view:
            try:
                view = view[connection.send(view, socket.MSG_NOSIGNAL) :]
            except BlockingIOError:
                if _writable(connection, deadline):
                    continue
                return BEHIND if len(view) == len(message) else Gone(FELL_BEHIND)
            except OSError:
                return Gone()
        return object()

    def wait(self, tokens: dict[object, Peer], wanted: set[object], deadline: float) -> dict[object, Answer | Gone]:
        """Each child's answers in the order it was sent the actions, until every one `wanted` came or the deadline."""
        queues: dict[Peer, list[object]] = {}
        for token, peer in tokens.items():
            queues.setdefault(peer, []).append(token)
        answers: dict[object, Answer | Gone] = {}
        pending = set(wanted)
        with selectors.DefaultSelector() as selector:
            for peer in queues:
                if peer.link.connection.fileno() >= 0:
                    selector.register(peer.link.connection, selectors.EVENT_READ, peer)
            while True:
                remaining = deadline - time.monotonic() if pending else 0.0
                for key, _ in selector.select(max(0.0, remaining)):
                    queue = queues[key.data]
                    for answer in self._read(key.data):
                        token = queue.pop(0)
                        answers[token] = answer
                        pending.discard(token)
                        if isinstance(answer, Gone) or not queue:
                            pending -= set(queue)
                            selector.unregister(key.fileobj)
                            break
                if remaining <= 0 or not pending:
                    return answers

    def _read(self, peer: Peer) -> list[Answer | Gone]:
        child = peer.link
        try:
            data = child.connection.recv(READ_SIZE)
        except BlockingIOError:
            return []
        except OSError:
            data = b""
        if not data:
            return [Gone()]
        answers: list[Answer | Gone] = []
        for message in child.reader.feed(data):
            if isinstance(message, Hello):
                child.name = child.name or message.name
            elif isinstance(message, Answer):
                child.name = message.name or child.name
                answers.append(message)
        return answers

    def forget(self, peer: Peer) -> None:
        self._forget(peer)

    def _forget(self, peer: Peer) -> None:
        with self._lock:
            if peer in self._peers:
                self._peers.remove(peer)
        peer.link.connection.close()

    def gone_records(self, peer: Peer, gone: Gone, during: dict[str, OpenWindow], after: dict[str, OpenWindow],
                     found_at: int | None) -> list[WindowRecord]:  # fmt: skip
        """The child's connection closed: it exited or was killed. Each of its windows' records says so."""
        if gone.cause == FELL_BEHIND:
            logger.warning("%s no longer joins windows: it fell behind", self.describe(peer))
            return []
        name, pid = self._name(peer), peer.link.pid
        records = [
            child_gone_record(kind, name, self.rank, window, pid, found_at, self.node_ip, stopped)
            for windows, stopped in ((during, False), (after, True))
            for kind, window in windows.items()
        ]
        if during:
            logger.warning("%s exited during a window: its files of the window are lost", self.describe(peer))
        if after:
            logger.warning("%s died after window %s stopped, before its files were known to be final",
                           self.describe(peer), ", ".join(sorted({w.window for w in after.values()})))  # fmt: skip
        return records

    def _name(self, peer: Peer) -> str:
        return peer.link.name or f"{self.worker_name}.pid{peer.link.pid}"

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
            peers, self._peers = self._peers, []
        for peer in peers:
            peer.link.connection.close()


def _writable(connection: socket.socket, deadline: float) -> bool:
    with selectors.DefaultSelector() as selector:
        selector.register(connection, selectors.EVENT_WRITE)
        return bool(selector.select(max(0.0, deadline - time.monotonic())))


# --- what the worker's children inherit ------------------------------------------------------------


def open_children(channel: ChildChannel | None, plan: Plan, worker: ProcessProfiler | None) -> ChildChannel:
    """The processes this Ray worker will start find its channel (processes forked from it are joined by
    nrlprof.runtime.children.join's fork handler, which the activation installs). A matched `worker`'s is named; a Ray
    worker's of an armed job that no pattern matched learns who it is, its Ray session and node, with its first window
    asked for (one it had already, as the process was reconfigured, is named to the children again)."""
    if worker is not None:
        identity, role = worker.role.identity, worker.role
        channel = ChildChannel(identity.name, identity.rank, role.node_ip, plan.timeout_s, worker.write_manifest)
        info = ChannelInfo(channel.address, role.session_dir, role.node_ip)
    else:
        channel = channel if isinstance(channel, ChildChannel) else ChildChannel("", 0, "", plan.timeout_s, None)
        info = ChannelInfo(channel.address)
    patches.install_undoable(ENVIRONMENT_PATCH, lambda: _children_environment(wire.encode(info)))
    return channel


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
