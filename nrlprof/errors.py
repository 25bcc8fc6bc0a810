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
        end = "" if expected.endswith(("?", ".")) else "."
        super().__init__(f"{source}={_shown(value)} is invalid{reason}. Expected {expected}{end}")


def _shown(value: object, limit: int = 200) -> str:
    """The value's repr, cut to `limit` characters (a huge YAML value, a 5000-digit integer)."""
    try:
        text = repr(value)
    except ValueError:  # int.__repr__ refuses integers beyond Python's digit limit
        return f"<{type(value).__name__} too large to show>"
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


class ToolError(NrlprofError):
    """A post-run tool got a missing, empty or unreadable input; the message names the file or directory."""

    def __init__(self, reason: str, path: os.PathLike | str | None = None) -> None:
        self.reason = reason
        self.path = path
        super().__init__(f"{path}: {reason}" if path is not None else reason)
