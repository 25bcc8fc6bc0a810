"""Pulling files for `nrlprof collect`: a streaming task per file, checked, written only inside the target dir."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from nrlprof.rayfix.node_tasks import pinned
from nrlprof.tools.cluster import FileFailed, NodeError, NodeInfo, NodeLost, get_from_node
from nrlprof.tools.collect.scan import PART_SUFFIX, RemoteFile, stream_chunks
from nrlprof.tools.progress import ByteMeter

CHUNK_SIZE = 8 * 1024 * 1024
PIPELINE_DEPTH = 4
LIST_TIMEOUT_S = 300.0
READ_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Transfer:
    chunk_size: int = CHUNK_SIZE
    depth: int = PIPELINE_DEPTH  # chunks in flight per node
    list_timeout_s: float = LIST_TIMEOUT_S
    read_timeout_s: float = READ_TIMEOUT_S


@dataclass(frozen=True)
class FileOutcome:
    node: str
    path: str  # relative to DIR
    size: int
    reason: str = ""


@functools.cache
def _remote_streamer():
    import ray

    return ray.remote(max_retries=0)(stream_chunks)


def index_entry(node: NodeInfo, file: RemoteFile) -> dict[str, Any]:
    return {
        "node": node.label,
        "node_id": node.node_id,
        "source": file.source,
        "size": file.size,
        "mtime_ns": file.mtime_ns,
        "sha256": file.sha256,
    }


def safe_key(label: str, dest: str) -> str:
    """`<node>/<dest>` checked to stay inside DIR: relative, no `.`/`..`/empty parts."""
    parts = PurePosixPath(dest).parts
    if not parts or PurePosixPath(dest).is_absolute() or any(p in ("", ".", "..") for p in parts) or "\0" in dest:
        raise FileFailed(f"destination {dest!r} would leave the target directory; not copied")
    return f"{label}/{dest}"


def make_parents(to: Path, key: str) -> Path:
    """Create DIR/<key>'s parent dirs, refusing to pass through a symbolic link or a non-directory in DIR."""
    path = to
    for part in PurePosixPath(key).parts[:-1]:
        path = path / part
        with contextlib.suppress(FileExistsError):
            path.mkdir()
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
            raise FileFailed(f"{path} is a symbolic link or not a directory; nothing is written through it")
    return path / PurePosixPath(key).name


def write_checked(file: RemoteFile, local: Path, chunks: Iterable[bytes], chunk_size: int, meter: ByteMeter,
                  where: str = "") -> None:  # fmt: skip
    """`file`'s bytes, `chunk_size` at a time from `chunks`, into `local` through a temporary part beside it: each
    chunk its expected length, the whole its listed sha256, the source's mode and mtime; renamed into place when
    all is well, nothing left at `local` or beside it otherwise. `where`: the source's place, for the messages."""
    part = local.with_name(local.name + PART_SUFFIX)
    digest = hashlib.sha256()
    try:
        with contextlib.suppress(FileNotFoundError):
            part.unlink()  # a leftover part, or a link planted in its place: removed, never followed
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as out:
            offsets = iter(range(0, file.size, chunk_size))
            for offset, data in zip(offsets, chunks, strict=False):
                if len(data) != min(chunk_size, file.size - offset):
                    raise FileFailed(f"{file.source} shrank{where} while copying; run collect again")
                out.write(data)
                digest.update(data)
                meter.add(len(data))
            if next(offsets, None) is not None:
                raise FileFailed(f"{file.source} shrank{where} while copying; run collect again")
            os.fchmod(out.fileno(), file.mode & 0o777)
        if digest.hexdigest() != file.sha256:
            raise FileFailed(f"{file.source} changed{where} while copying (sha256 differs); run collect again")
        os.utime(part, ns=(file.mtime_ns, file.mtime_ns), follow_symlinks=False)
        os.replace(part, local)
    finally:
        part.unlink(missing_ok=True)


def pull_file(node: NodeInfo, file: RemoteFile, local: Path, transfer: Transfer, meter: ByteMeter) -> None:
    """Stream one file from its node (at most `depth` chunks ahead), verify its sha256, rename it into place."""
    import ray

    chunks = (
        _remote_streamer()
        .options(**pinned(node.node_id), num_returns="streaming", _generator_backpressure_num_objects=transfer.depth)
        .remote(file.source, file.size, transfer.chunk_size)
    )
    what, timeout_s = f"reading {file.source}", transfer.read_timeout_s
    received = (get_from_node(_next_chunk(chunks, node, what, timeout_s), timeout_s, node, what)
                for _ in range(0, file.size, transfer.chunk_size))  # fmt: skip
    try:
        write_checked(file, local, received, transfer.chunk_size, meter, " on the node")
    except BaseException:
        with contextlib.suppress(Exception):
            ray.cancel(chunks)
        raise


def _next_chunk(chunks: Any, node: NodeInfo, what: str, timeout_s: float) -> Any:
    import ray

    ready, _ = ray.wait([chunks], timeout=timeout_s)
    if not ready:
        raise NodeLost(f"{node.describe()} did not answer within {timeout_s:.0f}s while {what}")
    try:
        return next(chunks)
    except StopIteration:
        raise FileFailed(f"{what}: the node sent fewer bytes than listed") from None


@dataclass
class NodePull:
    copied: list[FileOutcome] = field(default_factory=list)
    failed: list[FileOutcome] = field(default_factory=list)
    error: NodeError | None = None
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)


def pull_node(to: Path, node: NodeInfo, files: list[RemoteFile], transfer: Transfer, meter: ByteMeter) -> NodePull:
    result = NodePull()
    for position, file in enumerate(files):
        key = f"{node.label}/{file.dest}"
        try:
            key = safe_key(node.label, file.dest)
            pull_file(node, file, make_parents(to, key), transfer, meter)
        except FileFailed as err:
            result.failed.append(FileOutcome(node.label, key, file.size, str(err)))
            continue
        except NodeLost as err:
            result.error = NodeError(node.label, node.node_id, str(err))
            reason = f"not copied: {err}"
            rest = files[position:]
            result.failed += [FileOutcome(node.label, f"{node.label}/{f.dest}", f.size, reason) for f in rest]
            break
        except OSError as err:
            result.failed.append(FileOutcome(node.label, key, file.size, f"writing {to / key}: {err}"))
            continue
        result.copied.append(FileOutcome(node.label, key, file.size))
        result.entries[key] = index_entry(node, file)
    return result
