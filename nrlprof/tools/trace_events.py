"""The fields of torch trace events that summary reads, decoded with msgspec and nothing else.

msgspec builds one small struct per event with only these fields and skips the rest of the text
(kineto's `args` hold a dozen keys summary never looks at), several times faster than building full
dicts. It agrees with orjson, the reader of every other path, on well-formed slices of ASCII text whose
values have the types a profiler writes. Anything else takes the dict path, where summary's handling of
odd values lives: a slice with a value of another type (msgspec.ValidationError), one msgspec refuses,
and one where the two parsers could disagree: non-ASCII text (msgspec does not check the UTF-8 of a
string it skips; orjson refuses invalid UTF-8), integers of 19 digits or more (beyond 64 bits orjson
reads a float, msgspec an int) and exponents (a number beyond a double's range, in a field msgspec skips,
is not an error for it). Kineto writes neither.
"""

from __future__ import annotations

from typing import Any

import msgspec
import orjson

# Digits become 0 and E e, so that one substring search finds each kind of number (a regex is 10x slower)
_DIGITS = bytes.maketrans(b"123456789E", b"000000000e")
_EXPONENT = b"0e"  # also a name such as `sm90e1`: such slices take the dict path, to the same figures
_LONG_INTEGER = b"0" * 19


class Args(msgspec.Struct, gc=False):
    correlation: int | None = None


class Event(msgspec.Struct, gc=False):
    """A trace event as summary sees it; a field the event lacks has its default (dict.get's)."""

    ph: str | None = None
    cat: str | None = None
    name: str = ""
    ts: int | float | None = None
    dur: int | float | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    args: Args | None = None


_EVENTS = msgspec.json.Decoder(list[Event])


def decode_events(text: bytes) -> list[Event] | list[Any]:
    """The items of a JSON array of events: Events where msgspec reads them as orjson would, else orjson's.

    Raises orjson.JSONDecodeError for text that is not JSON.
    """
    numbers = text.translate(_DIGITS)
    if text.isascii() and _EXPONENT not in numbers and _LONG_INTEGER not in numbers:
        try:
            return _EVENTS.decode(text)
        except (msgspec.DecodeError, RecursionError):
            pass
    return orjson.loads(text)
