"""The error the post-run tools raise for inputs they cannot use."""

from __future__ import annotations

from pathlib import Path


class ToolError(Exception):
    """A missing, empty or unreadable input; the message names the file or directory."""

    def __init__(self, reason: str, path: Path | str | None = None) -> None:
        self.reason = reason
        self.path = Path(path) if path is not None else None
        super().__init__(f"{path}: {reason}" if path is not None else reason)
