"""What a worker and the processes it starts say over the worker's channel: one message a line, `{"<kind>": <its
fields>}` (`hello`, `actions`, `enable`, `answer`), each a dataclass read back checked (nrlprof.wire)."""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass

from nrlprof import wire
from nrlprof.runtime.windows.fanout import Answer
from nrlprof.runtime.windows.profiler import Action

ABSTRACT_PREFIX = "@"
READ_SIZE = 1 << 16  # bytes read from a channel connection at a time, either end


@dataclass(frozen=True)
class Hello:
    name: str


@dataclass(frozen=True)
class Actions:
    actions: tuple[Action, ...]
    deadline: float


@dataclass(frozen=True)
class Enable:
    """What a child needs to add the `kind` backend of a window asked for."""

    plan: str
    worker: str
    kind: str
    session_dir: str | None
    node_ip: str


@dataclass
class ChannelInfo:
    """Where a worker's children find its channel (NRLPROF_CHANNEL), and the worker's Ray session and node, which a
    worker no pattern matched learns with its first window asked for (then its children with `enable`)."""

    address: str
    session_dir: str | None = None
    node_ip: str = ""


Message = Hello | Actions | Enable | Answer
KINDS: dict[str, type] = {"hello": Hello, "actions": Actions, "enable": Enable, "answer": Answer}
_KIND_OF = {message: kind for kind, message in KINDS.items()}


def encode(message: Message) -> bytes:
    return json.dumps({_KIND_OF[type(message)]: wire.to_builtins(message)}, separators=(",", ":")).encode() + b"\n"


def decode(line: bytes) -> Message:
    """The message of one line; WireError (a ValueError) for anything else."""
    data = json.loads(line)
    if not isinstance(data, dict) or len(data) != 1 or next(iter(data)) not in KINDS:
        raise wire.WireError("not a channel message")
    ((kind, fields),) = data.items()
    return wire.convert(fields, KINDS[kind], kind)


class LineReader:
    """Bytes in, whole messages out; a line that is no message is dropped."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> list[Message]:
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        messages = []
        for line in lines:
            try:
                messages.append(decode(line))
            except (ValueError, RecursionError):
                continue
        return messages


def socket_address(address: str) -> str:
    """`@name` is a Linux abstract socket (no file; it goes with the process that holds it)."""
    return "\0" + address[1:] if address.startswith(ABSTRACT_PREFIX) else address


def peer_ids(connection: socket.socket) -> tuple[int, int]:
    """(pid, uid) of the process at the other end of a Unix socket, as the kernel says."""
    import struct

    credentials = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", credentials)
    return pid, uid
