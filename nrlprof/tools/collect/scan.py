"""What `nrlprof collect` takes from one node: runs there, inside a task pinned to it.

The rule (Ray's temp dir, e.g. `/tmp/ray`, is world-writable, and collect may run as root):
- Only the chosen `session_*` dirs of the node's Ray temp dir, each a real directory owned by the user Ray runs
  as (the user of this task); the `session_latest` link is never used.
- In a session: every regular file under `logs/nsight/` and `logs/rocprof_sys/`, and the manifests
  `logs/nrlprof/manifest-*.jsonl` that are regular files owned by Ray's user and writable by nobody else.
- Files a manifest names: only where the path lies under the session dir or under an allowed root (the torch
  output dir configured where collect runs, and every `--allow-dir`), reached through no symbolic link below
  that root. A directory named there is walked under the same rule.
- Symbolic links (to files or directories) are never followed; each one met is reported, as is every file or
  manifest line that breaks a rule or cannot be read. They are skipped and the rest is collected.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import stat
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from nrlprof.layout import DRY_RUN_PREFIX, LOGS_DIR, MANIFEST_DIR, MANIFEST_GLOB, REPORT_DIRS, file_safe
from nrlprof.manifest import parse_line

SESSION_GLOB = "session_*"
LATEST_SESSION = "session_latest"
PART_SUFFIX = ".nrlprof-part"
HASH_BLOCK = 1024 * 1024
MAX_MANIFEST_BYTES = 64 * 1024 * 1024
UNWRITABLE_BY_OTHERS = stat.S_IWGRP | stat.S_IWOTH


@dataclass(frozen=True)
class RemoteFile:
    dest: str  # relative to DIR/<node>, POSIX form
    source: str  # absolute path on the node
    size: int
    mtime_ns: int
    mode: int  # permission bits of the source
    sha256: str


@dataclass
class Scan:
    """One node's findings: {source: destination below DIR/<node>}, listed files that do not exist, refusals."""

    root: str
    found: dict[str, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    rejected: list[dict[str, str]] = field(default_factory=list)

    def reject(self, path: str | os.PathLike[str], reason: str) -> None:
        item = {"path": str(path), "reason": reason}
        if item not in self.rejected:
            self.rejected.append(item)

    def take(self, path: str) -> None:
        self.found.setdefault(path, os.path.relpath(path, self.root).replace(os.sep, "/"))


def is_session_name(name: str) -> bool:
    return fnmatch.fnmatchcase(name, SESSION_GLOB) and name != LATEST_SESSION and "/" not in name and name != ".."


def _lstat(path: str | os.PathLike[str]) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def session_dirs(temp_dir: Path, scan: Scan | None = None, wanted: set[str] | None = None) -> list[Path]:
    """Real `session_*` dirs (those named in `wanted`, or all) owned by this process's user; refusals go to `scan`."""
    sessions = []
    for path in sorted(temp_dir.glob(SESSION_GLOB)):
        if wanted is not None and path.name not in wanted:
            continue
        info = _lstat(path)
        if path.name == LATEST_SESSION or info is None or not is_session_name(path.name):
            continue
        if stat.S_ISLNK(info.st_mode):
            if scan is not None:
                scan.reject(path, "symbolic link to a session dir, not followed")
        elif not stat.S_ISDIR(info.st_mode):
            continue
        elif info.st_uid != os.getuid():
            if scan is not None:
                scan.reject(path, f"owned by uid {info.st_uid}, not by the user Ray runs as (uid {os.getuid()})")
        else:
            sessions.append(path)
    return sessions


def _manifest_entries(session: Path, scan: Scan | None = None) -> list[os.DirEntry]:
    directory = session / LOGS_DIR / MANIFEST_DIR
    if not _real_dirs(session, [LOGS_DIR, MANIFEST_DIR], scan):
        return []
    with os.scandir(directory) as entries:
        return sorted((e for e in entries if fnmatch.fnmatchcase(e.name, MANIFEST_GLOB)), key=lambda e: e.name)


def _real_dirs(base: Path, parts: list[str], scan: Scan | None = None) -> bool:
    """Whether base/parts[0]/parts[1]/... are all directories and none is a symbolic link."""
    path = base
    for part in parts:
        path = path / part
        info = _lstat(path)
        if info is None:
            return False
        if stat.S_ISLNK(info.st_mode):
            if scan is not None:
                scan.reject(path, "symbolic link to a directory, not followed")
            return False
        if not stat.S_ISDIR(info.st_mode):
            return False
    return True


def session_listing(temp_dir: str) -> dict[str, Any]:
    """The session dirs of a Ray temp dir, whether each holds manifests, and the session dirs refused."""
    root = Path(os.path.realpath(temp_dir))
    scan = Scan(str(root))
    sessions = [{"name": s.name, "manifests": bool(_manifest_entries(s))} for s in session_dirs(root, scan)]
    return {"sessions": sessions, "rejected": scan.rejected}


def list_sessions() -> dict[str, Any]:
    """Runs on a node: its session dirs, whether each holds manifests, and the node's current session."""
    from nrlprof import rayapi

    current = Path(rayapi.node_session_dir()).name
    return {"current": current, **session_listing(node_temp_dir())}


def _walk(
    directory: Path, scan: Scan, inside: list[tuple[str, str]], backend: str = "files", dest: str | None = None
) -> None:
    """Every regular file below `directory` that lies inside a root; links are reported, never followed.

    `dest`: the files go to `dest/<path below directory>` (else as `_take_listed` places them)."""
    for current, dirs, names in os.walk(directory):
        for name in sorted(dirs):
            if os.path.islink(os.path.join(current, name)):
                scan.reject(os.path.join(current, name), "symbolic link to a directory, not followed")
        for name in sorted(names):
            path = os.path.join(current, name)
            if name.endswith(PART_SUFFIX) or name.startswith(DRY_RUN_PREFIX):
                continue
            info = _lstat(path)
            if info is None:
                continue
            if stat.S_ISLNK(info.st_mode):
                scan.reject(path, "symbolic link, not followed")
            elif stat.S_ISREG(info.st_mode) and _inside(path, inside):
                if dest is None:
                    _take_listed(path, backend, scan)
                else:
                    relative = os.path.relpath(path, directory).replace(os.sep, "/")
                    scan.found.setdefault(path, f"{dest}/{relative}")


def _take_listed(path: str, backend: str, scan: Scan) -> None:
    """Under the temp dir: its place there; elsewhere: `<backend>/<absolute path without its leading />`."""
    if path.startswith(scan.root + os.sep):
        scan.take(path)
    else:
        scan.found.setdefault(path, f"{backend}/{path.lstrip(os.sep)}")


def _inside(path: str, roots: list[tuple[str, str]]) -> bool:
    """Whether `path` lies under a root (as given or resolved) and reaches it through no link below it."""
    for given, real in roots:
        for base in {given, real}:
            if path.startswith(base.rstrip(os.sep) + os.sep):
                return os.path.realpath(path) == os.path.join(real, os.path.relpath(path, base))
    return False


def root_pairs(roots: list[str]) -> list[tuple[str, str]]:
    return [(os.path.normpath(r), os.path.realpath(r)) for r in roots if os.path.isabs(r)]


def _trusted_manifest(entry: os.DirEntry, scan: Scan) -> bool:
    info = _lstat(entry.path)
    if info is None:
        return False
    if stat.S_ISLNK(info.st_mode):
        scan.reject(entry.path, "symbolic link, not followed")
    elif stat.S_ISDIR(info.st_mode):
        scan.reject(entry.path, "a directory, not a manifest")
    elif not stat.S_ISREG(info.st_mode):
        scan.reject(entry.path, "not a regular file")
    elif info.st_uid != os.getuid() or info.st_mode & UNWRITABLE_BY_OTHERS:
        scan.reject(entry.path, "owned by another user or writable by others: not read")
    elif info.st_size > MAX_MANIFEST_BYTES:
        scan.reject(entry.path, f"larger than {MAX_MANIFEST_BYTES} bytes: not read")
    else:
        return True
    return False


def manifest_listings(path: str, scan: Scan) -> list[tuple[str, str]]:
    """(path, backend) of every file the manifest names; each bad line or entry is reported and skipped."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(MAX_MANIFEST_BYTES + 1)
    except OSError as err:
        scan.reject(path, f"cannot read: {err.strerror or err}")
        return []
    lines = data.split(b"\n")
    torn = lines.pop() if lines else b""  # a writer killed mid-line leaves a last line without newline
    listed = []
    for number, raw in enumerate(lines, start=1):
        if raw.strip():
            listed += _line_listings(raw, f"{path}:{number}", scan)
    if torn.strip():  # taken when whole, never reported
        listed += _line_listings(torn, f"{path}:{len(lines) + 1}", Scan(scan.root))
    return listed


def _line_listings(raw: bytes, where: str, scan: Scan) -> list[tuple[str, str]]:
    record = parse_line(raw)
    if isinstance(record, str):
        scan.reject(where, f"{record}; skipped")
        return []
    files = record.get("files") or []
    if not isinstance(files, list):
        scan.reject(where, f'"files" is {files!r:.40}, not a list; skipped')
        return []
    backend = record.get("backend")
    backend = file_safe(backend) if isinstance(backend, str) and backend else "files"
    listed = []
    for name in files:
        if not isinstance(name, str) or "\0" in name or not name:
            scan.reject(where, f"file entry {name!r:.60} is not a path; skipped")
        elif not os.path.isabs(name):
            scan.reject(where, f"file entry {name!r:.60} is not an absolute path; skipped")
        else:
            listed.append((os.path.normpath(name), backend))
    return listed


def _add_listed(name: str, backend: str, scan: Scan, inside: list[tuple[str, str]]) -> None:
    info = _lstat(name)
    if info is None:
        if name not in scan.missing:
            scan.missing.append(name)
        return
    if not _inside(name, inside):
        scan.reject(name, "outside the session dir and the allowed dirs (--allow-dir); not taken")
    elif stat.S_ISLNK(info.st_mode):
        scan.reject(name, "symbolic link, not followed")
    elif stat.S_ISDIR(info.st_mode):
        _walk(Path(name), scan, inside, backend)
    elif stat.S_ISREG(info.st_mode):
        _take_listed(name, backend, scan)


def scan_outputs(temp_dir: str, sessions: list[str] | None, allowed_roots: list[str]) -> Scan:
    """A node's outputs in the named sessions (None: all of them), under the rule in this module's docstring."""
    root = Path(os.path.realpath(temp_dir))
    scan = Scan(str(root))
    for session in session_dirs(root, scan, None if sessions is None else set(sessions)):
        session_root = [(str(session), str(session))]
        for sub in REPORT_DIRS:
            if _real_dirs(session, [LOGS_DIR, sub], scan):
                _walk(session / LOGS_DIR / sub, scan, session_root)
        listed_roots = session_root + root_pairs(allowed_roots)
        for entry in _manifest_entries(session, scan):
            if not _trusted_manifest(entry, scan):
                continue
            scan.take(entry.path)
            for name, backend in manifest_listings(entry.path, scan):
                _add_listed(name, backend, scan, listed_roots)
    return scan


def take_tree(directory: Path, scan: Scan, roots: list[str], dest: str) -> None:
    """Every regular file below `directory` as `dest/<its path below directory>`, under the rule above: inside
    one of `roots`, reached through no symbolic link (each one met is reported)."""
    info = _lstat(directory)
    if info is None:
        return
    if stat.S_ISLNK(info.st_mode):
        scan.reject(directory, "symbolic link to a directory, not followed")
    elif stat.S_ISDIR(info.st_mode):
        _walk(directory, scan, root_pairs(roots), dest=dest)  # each file checked to lie inside a root


def sha256_of(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as handle:
        while block := handle.read(HASH_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def describe_files(found: dict[str, str], known: dict[str, list]) -> list[RemoteFile]:
    """Stat and hash each file; a file whose size and mtime match `known` (from the index) is not re-hashed."""
    files = []
    for source, dest in sorted(found.items(), key=lambda item: item[1]):
        try:
            info = os.lstat(source)
            if not stat.S_ISREG(info.st_mode):
                continue
            previous = known.get(source)
            if previous and previous[0] == info.st_size and previous[1] == info.st_mtime_ns:
                digest = previous[2]
            else:
                digest = sha256_of(source)
        except OSError:
            continue  # vanished or replaced since the scan
        files.append(RemoteFile(dest, source, info.st_size, info.st_mtime_ns, stat.S_IMODE(info.st_mode), digest))
    return files


def node_temp_dir() -> str:
    from nrlprof import rayapi

    return rayapi.node_temp_dir()


def list_node_outputs(sessions: list[str] | None, allowed_roots: list[str], known: dict[str, list]) -> dict[str, Any]:
    """Runs on a node: its temp dir, the files to take, listed files that do not exist, what was refused."""
    temp_dir = node_temp_dir()
    scan = scan_outputs(temp_dir, sessions, allowed_roots)
    files = describe_files(scan.found, known)
    return {"temp_dir": temp_dir, "files": [asdict(f) for f in files], "missing": scan.missing,
            "rejected": scan.rejected}  # fmt: skip


def stream_chunks(path: str, size: int, chunk_size: int):
    """Runs on a node as a streaming task: the file's first `size` bytes, `chunk_size` at a time."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        for offset in range(0, size, chunk_size):
            data = os.pread(fd, min(chunk_size, size - offset), offset)
            yield data
            if not data:
                return
    finally:
        os.close(fd)
