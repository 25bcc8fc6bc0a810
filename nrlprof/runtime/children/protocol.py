"""What a worker and the processes it starts say over the worker's channel: one JSON object a line.

- child -> worker, once, at connection: `{"hello": {"name": <provisional name>}}` (the pid comes from the socket).
- worker -> child: `{"actions": [<Action fields>...], "deadline": <CLOCK_MONOTONIC s>}`; the deadline is when
  the worker stops waiting (NRL_PROFILE_TIMEOUT_S after it sent them).
- worker -> child, in an armed job, before the first action of a window asked for: `{"enable": {"plan": <plan
  JSON with the backend asked for>, "worker": <worker descriptor>, "kind": <backend>, "session_dir": ...,
  "node_ip": ...}}`: the child adds that backend (and, if its worker was matched by no pattern, learns who the
  worker is). No answer.
- child -> worker, one per actions line: `{"name": <its name>, "open": [<backend kinds with a window open>],
  "records": [<window records>], "unwritten": [<records its worker completes and writes>]}`
  (nrlprof.runtime.windows.fanout.Answer).
"""

from __future__ import annotations

import json
import socket
from dataclasses import asdict
from typing import Any

from nrlprof.manifest import WindowRecord
from nrlprof.runtime.windows.fanout import Answer
from nrlprof.runtime.windows.profiler import Action

ABSTRACT_PREFIX = "@"
READ_SIZE = 1 << 16  # bytes read from a channel connection at a time, either end


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def actions_message(actions: tuple[Action, ...], deadline: float) -> bytes:
    return encode({"actions": [asdict(a) for a in actions], "deadline": deadline})


def enable_message(plan_json: str, descriptor: str, kind: str, session_dir: str | None, node_ip: str) -> dict:
    """The `enable` line's body: what a child needs to add the `kind` backend of a window asked for."""
    return {"plan": plan_json, "worker": descriptor, "kind": kind, "session_dir": session_dir, "node_ip": node_ip}


def actions_of(message: dict[str, Any]) -> tuple[Action, ...]:
    return tuple(Action(**fields) for fields in message["actions"])


def answer_message(answer: Answer) -> bytes:
    return encode({"name": answer.name, "open": list(answer.open), "records": [r.as_dict() for r in answer.records],
                   "unwritten": [r.as_dict() for r in answer.unwritten]})  # fmt: skip


def answer_of(message: dict[str, Any]) -> Answer:
    def records(key: str) -> tuple[WindowRecord, ...]:
        return tuple(WindowRecord.from_dict(r) for r in message.get(key) or () if isinstance(r, dict))

    name = str(message.get("name") or "")
    return Answer(tuple(message.get("open") or ()), records("records"), records("unwritten"), name)


class LineReader:
    """Bytes in, whole messages out; a line that is not a JSON object is dropped."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        messages = []
        for line in lines:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict):
                messages.append(message)
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
