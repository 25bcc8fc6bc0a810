"""nrlprof's exceptions: one root, so callers and the CLI can catch every failure of ours at once."""

from __future__ import annotations

import os


class NrlprofError(Exception):
    """The root of every error nrlprof raises on purpose."""


class ConfigError(NrlprofError, ValueError):
    """Invalid profiling configuration: names the input, the value and the expected form."""

    def __init__(self, source: str, value: object, expected: str, detail: str = "") -> None:
        self.source = source
        self.value = value
        self.expected = expected
        reason = f": {detail}" if detail else ""
        super().__init__(f"{source}={value!r} is invalid{reason}. Expected {expected}.")


class ToolError(NrlprofError):
    """A post-run tool got a missing, empty or unreadable input; the message names the file or directory."""

    def __init__(self, reason: str, path: os.PathLike | str | None = None) -> None:
        self.reason = reason
        self.path = path
        super().__init__(f"{path}: {reason}" if path is not None else reason)
