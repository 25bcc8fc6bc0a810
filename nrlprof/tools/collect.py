"""`nrlprof collect`: copy every nrlprof output from every node of a running Ray cluster into one directory.

On each alive node a task (pinned to it, `num_cpus=0`) lists the outputs: nsys and rocprof-sys reports in every
`session_*` dir under the node's Ray temp dir (not only `session_latest`, which can be stale), nrlprof manifests,
and the files the manifests list, each with size, mtime and sha256. The driver then pulls each file through a
streaming task pinned to its node that yields 8 MiB chunks, at most a few ahead of the driver (the nodes in
parallel), so a multi-GB report is never whole in memory on either side; it verifies the sha256 and renames the
finished file into place. Tasks, not actors: a task reuses a pooled worker, an actor starts a process.

Layout of `DIR`:

    DIR/.nrlprof-collect.json                 index: what was copied from where (size, mtime, sha256)
    DIR/<node>/session_<...>/logs/nsight/<report>.nsys-rep
    DIR/<node>/session_<...>/logs/rocprof_sys/<...>
    DIR/<node>/session_<...>/logs/nrlprof/manifest-<host>-<pid>.jsonl
    DIR/<node>/<backend>/<absolute path on the node without its leading />   (e.g. torch/home/u/run/trace/...)

`<node>` is the node's hostname when no other alive node shares it, else `<hostname>-<ip>`, else (several
raylets on one machine, as `ray.cluster_utils.Cluster` starts them) `<hostname>-<ip>-<first 8 hex of node id>`.
A file is copied again only when its size, mtime or sha256 differ from the index (or, without an index entry,
from the file already in DIR).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import json
import logging
import os
import re
import socket
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from nrlprof.manifest import MANIFEST_DIR_NAME, MANIFEST_GLOB, read_records

CHUNK_SIZE = 8 * 1024 * 1024
PIPELINE_DEPTH = 4
INDEX_NAME = ".nrlprof-collect.json"
INDEX_VERSION = 1
PART_SUFFIX = ".nrlprof-part"
LIST_TIMEOUT_S = 300.0
READ_TIMEOUT_S = 300.0
CONNECT_TIMEOUT_S = 5.0
REPORT_DIRS = ("nsight", "rocprof_sys")
SKIPPED_PREFIXES = ("nrlprof-dryrun-",)
HASH_BLOCK = 1024 * 1024

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2

Progress = Callable[[int, int], None]


class BadInput(Exception):
    """Input the command cannot work with (no cluster, unwritable directory); the message names it."""


class NodeLost(Exception):
    """The node stopped answering (died, was removed, timed out)."""


class FileFailed(Exception):
    """One file could not be copied; the others can."""


@dataclass(frozen=True)
class Transfer:
    chunk_size: int = CHUNK_SIZE
    depth: int = PIPELINE_DEPTH  # chunks in flight per node
    list_timeout_s: float = LIST_TIMEOUT_S
    read_timeout_s: float = READ_TIMEOUT_S


@dataclass(frozen=True)
class NodeInfo:
    node_id: str
    hostname: str
    ip: str
    label: str

    def describe(self) -> str:
        return f"node {self.label} (id {self.node_id[:12]}, {self.ip})"


@dataclass(frozen=True)
class RemoteFile:
    dest: str  # relative to DIR/<node>, POSIX form
    source: str  # absolute path on the node
    size: int
    mtime_ns: int
    sha256: str


@dataclass
class NodeListing:
    node: NodeInfo
    temp_dir: str = ""
    files: list[RemoteFile] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    error: str | None = None


@dataclass(frozen=True)
class FileOutcome:
    node: str
    path: str  # relative to DIR
    size: int
    reason: str = ""


@dataclass(frozen=True)
class NodeError:
    node: str
    node_id: str
    reason: str


@dataclass
class CollectResult:
    to: str
    nodes: list[dict[str, Any]] = field(default_factory=list)
    copied: list[FileOutcome] = field(default_factory=list)
    skipped: list[FileOutcome] = field(default_factory=list)
    failed: list[FileOutcome] = field(default_factory=list)
    node_errors: list[NodeError] = field(default_factory=list)
    missing: list[dict[str, str]] = field(default_factory=list)
    bytes_copied: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failed and not self.node_errors

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.ok else EXIT_FAILED

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["ok"] = self.ok
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)


# --------------------------------------------------------------------------- connecting


def resolve_address(address: str | None) -> str:
    """`host:port` (or `ray://host:port`) of the cluster to join; `None`/"auto" finds the running local one."""
    if address and address.startswith("ray://"):
        return address
    from ray._private.services import canonicalize_bootstrap_address_or_die

    try:
        return canonicalize_bootstrap_address_or_die(address or "auto")
    except (ConnectionError, ValueError) as err:
        where = f"--address {address!r}" if address else "RAY_ADDRESS / the local Ray instance"
        raise BadInput(f"no Ray cluster found from {where}: {err}") from None


def probe_address(address: str, given: str | None = None, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Fail fast where `ray.init` would hang: nothing listening at the cluster's address."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    name = repr(given or address) + ("" if given in (None, address) else f" ({address})")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return
    except ValueError:
        raise BadInput(f"address {name} is not of the form host:port") from None
    except OSError as err:
        raise BadInput(f"no Ray cluster reachable at {name}: {err.strerror or err}") from None


def connect(address: str | None) -> bool:
    """Join the cluster unless Ray is already initialised; True when this call initialised it."""
    import ray

    if ray.is_initialized():
        return False
    resolved = resolve_address(address)
    probe_address(resolved, address)
    try:
        ray.init(address=resolved, logging_level=logging.WARNING, log_to_driver=False)
    except (ConnectionError, RuntimeError) as err:
        raise BadInput(f"could not connect to the Ray cluster at {resolved!r}: {err}") from None
    return True


def _sanitise(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", text) or "node"


def label_nodes(nodes: Iterable[tuple[str, str, str]]) -> list[NodeInfo]:
    """(node id, hostname, ip) -> NodeInfo with a directory label that is unique among `nodes`."""
    nodes = list(nodes)
    hosts = Counter(host for _, host, _ in nodes)
    host_ips = Counter((host, ip) for _, host, ip in nodes)
    infos = []
    for node_id, host, ip in nodes:
        if hosts[host] == 1:
            label = host
        elif host_ips[(host, ip)] == 1:
            label = f"{host}-{ip}"
        else:
            label = f"{host}-{ip}-{node_id[:8]}"
        infos.append(NodeInfo(node_id, host, ip, _sanitise(label)))
    return infos


def alive_nodes() -> list[NodeInfo]:
    import ray

    rows = [n for n in ray.nodes() if n.get("Alive")]
    return label_nodes((n["NodeID"], n.get("NodeManagerHostname", ""), n.get("NodeManagerAddress", "")) for n in rows)


def pinned(node_id: str) -> dict[str, Any]:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return {"num_cpus": 0, "scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=False)}


# --------------------------------------------------------------------------- on each node


def _is_listed_name(name: str) -> bool:
    return not name.endswith(PART_SUFFIX) and not name.startswith(SKIPPED_PREFIXES)


def _walk_files(root: Path) -> Iterator[Path]:
    for directory, _, names in os.walk(root):
        for name in sorted(names):
            path = Path(directory, name)
            if _is_listed_name(name) and path.is_file() and not path.is_symlink():
                yield path


def session_dirs(temp_dir: Path) -> list[Path]:
    """Every real `session_*` dir (not the `session_latest` link, which may point at an older session)."""
    return sorted(p for p in temp_dir.glob("session_*") if p.is_dir() and not p.is_symlink())


def _manifest_dest(path: Path, temp_dir: Path, backend: str) -> str:
    if path.is_relative_to(temp_dir):
        return path.relative_to(temp_dir).as_posix()
    return f"{_sanitise(backend or 'files')}/{path.as_posix().lstrip('/')}"


def _listed_paths(manifest: Path) -> Iterator[tuple[str, str]]:
    for record in read_records(manifest):
        for name in record.get("files") or ():
            yield str(name), str(record.get("backend") or "files")


def scan_outputs(temp_dir: str | os.PathLike[str]) -> tuple[dict[str, str], list[str]]:
    """Outputs under a node's Ray temp dir: ({absolute source: destination below DIR/<node>}, missing listed)."""
    root = Path(os.path.realpath(temp_dir))
    found: dict[str, str] = {}
    missing: list[str] = []
    for session in session_dirs(root):
        logs = session / "logs"
        for sub in REPORT_DIRS:
            for path in _walk_files(logs / sub):
                found.setdefault(str(path), path.relative_to(root).as_posix())
        for manifest in sorted((logs / MANIFEST_DIR_NAME).glob(MANIFEST_GLOB)):
            found.setdefault(str(manifest), manifest.relative_to(root).as_posix())
            for name, backend in _listed_paths(manifest):
                _add_listed(name, backend, root, found, missing)
    return found, missing


def _add_listed(name: str, backend: str, root: Path, found: dict[str, str], missing: list[str]) -> None:
    path = Path(os.path.realpath(name))
    if not Path(name).is_absolute() or not path.exists():
        if name not in missing:
            missing.append(name)
        return
    for file in _walk_files(path) if path.is_dir() else [path]:
        found.setdefault(str(file), _manifest_dest(file, root, backend))


def sha256_of(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(HASH_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def describe_files(found: dict[str, str], known: dict[str, list]) -> list[RemoteFile]:
    """Stat and hash each file; a file whose size and mtime match `known` (from the index) is not re-hashed."""
    files = []
    for source, dest in sorted(found.items(), key=lambda item: item[1]):
        try:
            stat = os.stat(source)
            previous = known.get(source)
            if previous and previous[0] == stat.st_size and previous[1] == stat.st_mtime_ns:
                digest = previous[2]
            else:
                digest = sha256_of(source)
        except OSError:
            continue  # vanished since the scan
        files.append(RemoteFile(dest, source, stat.st_size, stat.st_mtime_ns, digest))
    return files


def node_temp_dir() -> str:
    import ray

    return ray._private.worker._global_node.get_temp_dir_path()


def list_node_outputs(known: dict[str, list]) -> dict[str, Any]:
    """Runs on a node: its temp dir, the outputs found there and the manifest entries that do not exist."""
    temp_dir = node_temp_dir()
    found, missing = scan_outputs(temp_dir)
    files = describe_files(found, known)
    return {"temp_dir": temp_dir, "files": [asdict(f) for f in files], "missing": missing}


def stream_chunks(path: str, size: int, chunk_size: int) -> Iterator[bytes]:
    """Runs on a node as a streaming task: the file's first `size` bytes, `chunk_size` at a time."""
    with open(path, "rb") as handle:
        for offset in range(0, size, chunk_size):
            data = os.pread(handle.fileno(), min(chunk_size, size - offset), offset)
            yield data
            if not data:
                return


@functools.cache
def _remote_lister():
    import ray

    return ray.remote(max_retries=0)(list_node_outputs)


@functools.cache
def _remote_streamer():
    import ray

    return ray.remote(max_retries=0)(stream_chunks)


# --------------------------------------------------------------------------- the index


def load_index(to: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads((to / INDEX_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    files = data.get("files") if isinstance(data, dict) else None
    return files if isinstance(files, dict) else {}


def save_index(to: Path, files: dict[str, dict[str, Any]]) -> None:
    text = json.dumps({"version": INDEX_VERSION, "files": files}, indent=1, sort_keys=True)
    handle, temp = tempfile.mkstemp(prefix=INDEX_NAME, suffix=PART_SUFFIX, dir=to)
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(text)
    os.replace(temp, to / INDEX_NAME)


def index_entry(node: NodeInfo, file: RemoteFile) -> dict[str, Any]:
    return {
        "node": node.label,
        "node_id": node.node_id,
        "source": file.source,
        "size": file.size,
        "mtime_ns": file.mtime_ns,
        "sha256": file.sha256,
    }


def known_sources(index: dict[str, dict[str, Any]], node: NodeInfo) -> dict[str, list]:
    """What the index knows of a node's files: source -> [size, mtime_ns, sha256]."""
    return {
        e["source"]: [e["size"], e["mtime_ns"], e["sha256"]]
        for e in index.values()
        if e.get("node") == node.label and {"source", "size", "mtime_ns", "sha256"} <= e.keys()
    }


def is_unchanged(to: Path, key: str, file: RemoteFile, index: dict[str, dict[str, Any]]) -> bool:
    local = to / key
    try:
        if local.stat().st_size != file.size:
            return False
    except OSError:
        return False
    entry = index.get(key) or {}
    if (entry.get("size"), entry.get("mtime_ns"), entry.get("sha256")) == (file.size, file.mtime_ns, file.sha256):
        return True
    return sha256_of(local) == file.sha256


# --------------------------------------------------------------------------- pulling


def prepare_destination(to: Path) -> Path:
    """DIR exists (created if needed) and is writable, else BadInput naming it."""
    to = Path(to).expanduser().absolute()
    try:
        to.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=to):
            pass
    except OSError as err:
        raise BadInput(f"--to {str(to)!r} is not a writable directory: {err.strerror or err}") from None
    return to


class _Meter:
    """Thread-safe byte counter feeding the optional progress callback."""

    def __init__(self, total: int, progress: Progress | None) -> None:
        self.total = total
        self.done = 0
        self._progress = progress
        self._lock = threading.Lock()

    def add(self, count: int) -> None:
        with self._lock:
            self.done += count
            if self._progress is not None:
                self._progress(self.done, self.total)


def get_from_node(ref: Any, timeout_s: float, node: NodeInfo, what: str) -> Any:
    import ray

    try:
        return ray.get(ref, timeout=timeout_s)
    except ray.exceptions.RayTaskError as err:
        raise FileFailed(f"{what}: {_cause(err)}") from None
    except ray.exceptions.GetTimeoutError:
        raise NodeLost(f"{node.describe()} did not answer within {timeout_s:.0f}s while {what}") from None
    except ray.exceptions.RayError as err:
        raise NodeLost(f"{node.describe()} died or left the cluster while {what}: {type(err).__name__}") from None


def _cause(err: Exception) -> str:
    cause = getattr(err, "cause", None)
    return f"{type(cause).__name__}: {cause}" if cause is not None else str(err).splitlines()[0]


def pull_file(node: NodeInfo, file: RemoteFile, local: Path, transfer: Transfer, meter: _Meter) -> None:
    """Stream one file from its node (at most `depth` chunks ahead), verify its sha256, rename it into place."""
    import ray

    local.parent.mkdir(parents=True, exist_ok=True)
    part = local.with_name(local.name + PART_SUFFIX)
    digest = hashlib.sha256()
    chunks = (
        _remote_streamer()
        .options(**pinned(node.node_id), num_returns="streaming", _generator_backpressure_num_objects=transfer.depth)
        .remote(file.source, file.size, transfer.chunk_size)
    )
    what, timeout_s = f"reading {file.source}", transfer.read_timeout_s
    try:
        with open(part, "wb") as out:
            for offset in range(0, file.size, transfer.chunk_size):
                data = get_from_node(_next_chunk(chunks, node, what, timeout_s), timeout_s, node, what)
                if len(data) != min(transfer.chunk_size, file.size - offset):
                    raise FileFailed(f"{file.source} shrank on the node while copying; run collect again")
                out.write(data)
                digest.update(data)
                meter.add(len(data))
        if digest.hexdigest() != file.sha256:
            raise FileFailed(f"{file.source} changed on the node while copying (sha256 differs); run collect again")
        os.utime(part, ns=(file.mtime_ns, file.mtime_ns))
        os.replace(part, local)
    except BaseException:
        with contextlib.suppress(Exception):
            ray.cancel(chunks)
        raise
    finally:
        part.unlink(missing_ok=True)


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


def pull_node(to: Path, listing: NodeListing, files: list[RemoteFile], transfer: Transfer, meter: _Meter) -> NodePull:
    node = listing.node
    result = NodePull()
    for position, file in enumerate(files):
        key = f"{node.label}/{file.dest}"
        try:
            pull_file(node, file, to / key, transfer, meter)
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


# --------------------------------------------------------------------------- listing


def list_nodes(nodes: list[NodeInfo], index: dict[str, dict[str, Any]], timeout_s: float) -> list[NodeListing]:
    """One listing task per node, all at once; a node that fails gets its error, not an exception."""
    import ray

    lister = _remote_lister()
    listings = [NodeListing(n) for n in nodes]
    refs = [lister.options(**pinned(n.node_id)).remote(known_sources(index, n)) for n in nodes]
    deadline = time.monotonic() + timeout_s
    for listing, ref in zip(listings, refs, strict=True):
        node = listing.node
        try:
            data = get_from_node(ref, max(0.1, deadline - time.monotonic()), node, "listing its files")
        except (NodeLost, FileFailed) as err:
            listing.error = str(err) if isinstance(err, NodeLost) else f"{node.describe()}: {err}"
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True)
        else:
            listing.temp_dir = data["temp_dir"]
            listing.files = [RemoteFile(**f) for f in data["files"]]
            listing.missing = data["missing"]
    return listings


def node_summary(listing: NodeListing) -> dict[str, Any]:
    node = listing.node
    return {
        "label": node.label,
        "node_id": node.node_id,
        "hostname": node.hostname,
        "ip": node.ip,
        "temp_dir": listing.temp_dir,
        "files": len(listing.files),
        "bytes": sum(f.size for f in listing.files),
        "error": listing.error,
    }


def _split_unchanged(
    to: Path, listing: NodeListing, index: dict[str, dict[str, Any]], result: CollectResult
) -> list[RemoteFile]:
    """Record the node's unchanged files as skipped; return the ones to copy."""
    to_copy = []
    for file in listing.files:
        key = f"{listing.node.label}/{file.dest}"
        if is_unchanged(to, key, file, index):
            result.skipped.append(FileOutcome(listing.node.label, key, file.size))
            index[key] = index_entry(listing.node, file)
        else:
            to_copy.append(file)
    return to_copy


def collect(
    to: Path | str,
    address: str | None = None,
    progress: Progress | None = None,
    *,
    chunk_size: int = CHUNK_SIZE,
    depth: int = PIPELINE_DEPTH,
    list_timeout_s: float = LIST_TIMEOUT_S,
    read_timeout_s: float = READ_TIMEOUT_S,
    after_listing: Callable[[list[NodeListing]], None] | None = None,
) -> CollectResult:
    """Copy every node's nrlprof outputs into `to`; `progress(done_bytes, total_bytes)` is called as bytes arrive.

    `after_listing` runs between listing and pulling (tests use it to kill a node at that point).
    Raises BadInput for an unwritable `to` or an unreachable cluster; node and file failures go in the result.
    """
    import ray

    if chunk_size <= 0 or depth <= 0:
        raise ValueError("chunk_size and depth must be > 0")
    transfer = Transfer(chunk_size, depth, list_timeout_s, read_timeout_s)
    started = time.monotonic()
    to = prepare_destination(Path(to))
    initialised = connect(address)
    try:
        result = CollectResult(to=str(to))
        index = load_index(to)
        listings = list_nodes(alive_nodes(), index, transfer.list_timeout_s)
        if after_listing is not None:
            after_listing(listings)
        pull_all(to, listings, index, result, transfer, progress)
        save_index(to, index)
    finally:
        if initialised:
            ray.shutdown()
    result.bytes_copied = sum(f.size for f in result.copied)
    result.seconds = round(time.monotonic() - started, 3)
    return result


def pull_all(
    to: Path,
    listings: list[NodeListing],
    index: dict[str, dict[str, Any]],
    result: CollectResult,
    transfer: Transfer,
    progress: Progress | None,
) -> None:
    """Pull the changed files of every listed node, the nodes in parallel; fills `result` and `index`."""
    plans = []
    for listing in listings:
        result.nodes.append(node_summary(listing))
        result.missing += [{"node": listing.node.label, "path": p} for p in listing.missing]
        if listing.error:
            result.node_errors.append(NodeError(listing.node.label, listing.node.node_id, listing.error))
            continue
        plans.append((listing, _split_unchanged(to, listing, index, result)))
    meter = _Meter(sum(f.size for _, files in plans for f in files), progress)
    with ThreadPoolExecutor(max_workers=max(1, min(8, len(plans)))) as pool:
        pulls = list(pool.map(lambda plan: pull_node(to, *plan, transfer, meter), plans))
    for pull in pulls:
        result.copied += pull.copied
        result.failed += pull.failed
        index.update(pull.entries)
        if pull.error is not None:
            result.node_errors.append(pull.error)


# --------------------------------------------------------------------------- command line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--to", required=True, metavar="DIR", help="directory to copy the outputs into")
    parser.add_argument("--address", default=None, help="Ray cluster address (default: RAY_ADDRESS or the local one)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def _mb(count: int) -> str:
    return f"{count / 1e6:.1f} MB"


def print_summary(result: CollectResult, stream: Any = sys.stderr) -> None:
    print(
        f"nrlprof collect: {len(result.copied)} copied ({_mb(result.bytes_copied)}), "
        f"{len(result.skipped)} unchanged, {len(result.failed)} failed, "
        f"from {len(result.nodes)} node(s) into {result.to} in {result.seconds:.1f}s",
        file=stream,
    )
    for error in result.node_errors:
        print(f"  error: {error.reason}", file=stream)
    for failure in result.failed:
        if not failure.reason.startswith("not copied: "):
            print(f"  failed: {failure.path}: {failure.reason}", file=stream)
    for item in result.missing:
        print(f"  note: {item['path']} (listed in a manifest on {item['node']}) does not exist", file=stream)


@contextlib.contextmanager
def rich_progress() -> Iterator[Progress | None]:
    """A byte progress bar on stderr when it is a terminal; None otherwise."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, TimeRemainingColumn, TransferSpeedColumn
    from rich.progress import Progress as Bar

    columns = (BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn())
    with Bar(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("collect", total=None)
        yield lambda done, total: bar.update(task, completed=done, total=total)


def run(args: argparse.Namespace) -> int:
    try:
        with rich_progress() as progress:
            result = collect(Path(args.to), address=args.address, progress=progress)
    except BadInput as err:
        print(f"nrlprof collect: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.json:
        print(result.to_json())
    print_summary(result)
    return result.exit_code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nrlprof collect", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
