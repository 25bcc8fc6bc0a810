"""The fields of torch trace events that summary reads, decoded with msgspec and nothing else.

msgspec builds one small struct per event with only these fields and skips the rest of the text
(kineto's `args` hold a dozen keys summary never looks at), several times faster than building full
dicts. For every text orjson (the reader of every other path) reads, the fields come out as orjson reads
them, or the slice takes the dict path, where summary's handling of odd values lives: a value of another
type (msgspec.ValidationError), text msgspec refuses, and integers beyond 64 bits, which orjson reads as
floats (msgspec is made to refuse them). Text orjson refuses only in a
field summary does not read (invalid UTF-8, a number beyond a double's range) is read all the same: the
figures do not depend on it.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
import orjson

# orjson reads integers beyond 64 bits as floats, msgspec as ints: those take the dict path (as do those of
# 2**63 to 2**64, which msgspec cannot bound)
Int64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]


class Args(msgspec.Struct, gc=False):
    correlation: Int64 | None = None


class Event(msgspec.Struct, gc=False):
    """A trace event as summary sees it; a field the event lacks has its default (dict.get's)."""

    ph: str | None = None
    cat: str | None = None
    name: str = ""
    ts: Int64 | float | None = None
    dur: Int64 | float | None = None
    pid: Int64 | str | None = None
    tid: Int64 | str | None = None
    args: Args | None = None


_EVENTS = msgspec.json.Decoder(list[Event])


def decode_events(text: bytes) -> list[Event] | list[Any]:
    """The items of a JSON array of events: Events where msgspec reads them as orjson would, else orjson's.

    Raises orjson.JSONDecodeError for text neither reads.
    """
    try:
        return _EVENTS.decode(text)
    except (ValueError, msgspec.DecodeError, RecursionError):
        return orjson.loads(text)
