"""Kineto's trace text made valid JSON: names it writes with a raw `"` are escaped, in one bounded-memory pass.

Kineto (torch 2.13) writes each event's name as `"name": "<value>"` on a line of its own, after turning `\\`
into `/`, dropping newlines and replacing a name holding any other unprintable byte by `unknown`; a `"` is
left as it is. Such quotes come from user range names, from code with a quote in its file or function name,
and from torch's Python tracer (with_stack), which names frames through pointers into their code objects:
a module body run by an import during the window is freed before export, so its frame is named with
whatever bytes reuse that memory. The trace's last line, `"traceName": "<path>"`, carries the path unescaped.
"""

from __future__ import annotations

import json
import re
import sys
from typing import BinaryIO

# The scan of one chunk holds the GIL (~0.6 ms a MB); it runs beside the worker's next step, which then waits no longer.
CHUNK_BYTES = 1 << 20
# A string value after `...name": "` holding a `"` or `\` before its closing quote (one line; fast to scan).
# Possessive runs (Python 3.11+) never backtrack: the scan of a trace without such a name takes half the time.
_RUN = b"*+" if sys.version_info >= (3, 11) else b"*"
_SUSPECT = re.compile(rb'ame": "[^"\\\n]' + _RUN + rb'["\\][^\n"]' + _RUN + b'"')
# The two kinds of line Kineto writes a free-text name on: an event's (or a metadata arg's) name, the trailer.
_NAME_LINE = re.compile(rb'(?P<head>[ \t]*(?:\],)?"(?:name|traceName)": ")(?P<value>.*)(?P<tail>"(?:,| \})?)[ \t]*')


def _repaired(line: bytes) -> bytes | None:
    """The line with its name value escaped as JSON; None when it is no name line or already valid."""
    match = _NAME_LINE.fullmatch(line)
    if match is None:
        return None
    value = match["value"]
    try:
        json.loads(b'"' + value + b'"')
        return None
    except ValueError:
        pass
    escaped = json.dumps(value.decode("utf-8", "replace"), ensure_ascii=False)[1:-1].encode("utf-8")
    return match["head"] + escaped + match["tail"]


def _repair_lines(text: bytes) -> tuple[bytes, int]:
    """`text` (whole lines) with every broken name line repaired, and how many were."""
    pieces: list[bytes] = []
    done = 0
    repairs = 0
    position = 0
    while (match := _SUSPECT.search(text, position)) is not None:
        start = text.rfind(b"\n", 0, match.start()) + 1
        end = text.find(b"\n", match.end())
        end = len(text) if end < 0 else end
        fixed = _repaired(text[start:end])
        if fixed is not None:
            pieces += [text[done:start], fixed]
            done = end
            repairs += 1
        position = end
    if not repairs:
        return text, 0
    pieces.append(text[done:])
    return b"".join(pieces), repairs


def copy_repaired(source: BinaryIO, sink: BinaryIO | None, chunk_bytes: int = CHUNK_BYTES) -> int:
    """Copy `source` to `sink` (None: only count) with broken name lines repaired; the number repaired.

    Memory holds one chunk plus the longest line.
    """
    repairs = 0
    carry = b""
    while True:
        block = source.read(chunk_bytes)
        text = carry + block
        cut = len(text) if not block else text.rfind(b"\n") + 1
        whole, carry = text[:cut], text[cut:]
        fixed, count = _repair_lines(whole)
        repairs += count
        if sink is not None:
            sink.write(fixed)
        if not block:
            return repairs


def safe_metadata(value):
    """Kineto pastes metadata into the trace as JSON text but turns every backslash into `/`, which breaks any
    JSON escape: strings keep only printable ASCII other than `"` and `\\` (the rest becomes `_`)."""
    if isinstance(value, str):
        return "".join(c if " " <= c <= "~" and c not in '"\\' else "_" for c in value)
    if isinstance(value, dict):
        return {safe_metadata(k): safe_metadata(v) for k, v in value.items()}
    if isinstance(value, list):
        return [safe_metadata(v) for v in value]
    return value


def repair_note(repairs: int) -> str:
    return (
        f"torch wrote {repairs} event name(s) with a raw quote, which nrlprof escaped to keep the trace valid JSON "
        "(a Python frame of code freed during the window can be named with stray bytes)"
    )
