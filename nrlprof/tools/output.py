"""Writing a tool's output file: under a temporary name in its directory, renamed into place when complete.

The file gets the permissions of any new file (0o666 less the umask), not a temporary file's 0o600; a failed
or interrupted write leaves nothing, neither at the path nor beside it. An output path that cannot be written
(its directory missing or not writable, the path itself a directory) is bad input: a ToolError naming it, raised
before any work is done (`check_output`) and again if writing fails all the same.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO

from nrlprof.errors import ToolError

NEW_FILE_MODE = 0o666  # less the umask, as open() gives a new file


def check_output(path: Path) -> Path:
    """`path`, when a file can be written there; else ToolError naming the path or directory in the way."""
    path = Path(path)
    directory = path.parent
    if not directory.is_dir():
        raise ToolError("output directory does not exist" if not directory.exists() else "not a directory", directory)
    if path.is_dir():
        raise ToolError("a directory, not a file to write", path)
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ToolError("output directory is not writable", directory)
    return path


class AtomicOutput:
    """`path`'s content, written to `.<name>.<random>.tmp` beside it; `commit()` renames it into place.

    As a context manager: committed when the block ends, removed when it raises.
    """

    def __init__(self, path: Path, buffering: int = -1) -> None:
        self.path = check_output(path)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        while True:
            self.temporary = self.path.with_name(f".{self.path.name}.{os.urandom(4).hex()}.tmp")
            try:
                fd = os.open(self.temporary, flags, NEW_FILE_MODE)
            except FileExistsError:
                continue
            except OSError as exc:
                raise ToolError(f"cannot write: {exc.strerror or exc}", self.path) from exc
            break
        self.file: BinaryIO = os.fdopen(fd, "wb", buffering)

    def commit(self) -> None:
        try:
            self.file.close()
            os.replace(self.temporary, self.path)
        except OSError as exc:
            self.abort()
            raise ToolError(f"cannot write: {exc.strerror or exc}", self.path) from exc

    def abort(self) -> None:
        self.file.close()
        self.temporary.unlink(missing_ok=True)

    def __enter__(self) -> BinaryIO:
        return self.file

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        if kind is None:
            self.commit()
        else:
            self.abort()


def write_output(path: Path, data: bytes) -> None:
    """`data` as the whole of `path`, written atomically."""
    with AtomicOutput(path) as handle:
        try:
            handle.write(data)
        except OSError as exc:  # a full disk, a quota
            raise ToolError(f"cannot write: {exc.strerror or exc}", path) from exc
