"""`nrlprof collect`: copy one job's nrlprof outputs from every node of a running Ray cluster into one directory
(with no cluster, from this machine's Ray session dirs: collect.local, by the same rules and into the same layout).

Which session is the job, how each node's files are listed, pulled and checked, and the layout of DIR:
docs/design.md, "How collect copies a job's files".
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from nrlprof import exit_codes
from nrlprof.tools.cluster import (
    BadInput,
    NodeError,
    NodeInfo,
    alive_nodes,
    connected,
    run_on_nodes,
)
from nrlprof.tools.collect.index import is_unchanged, known_sources, load_index, save_index
from nrlprof.tools.collect.pull import (
    CHUNK_SIZE,
    LIST_TIMEOUT_S,
    PIPELINE_DEPTH,
    READ_TIMEOUT_S,
    FileOutcome,
    Transfer,
    index_entry,
    pull_node,
)
from nrlprof.tools.collect.scan import (
    RemoteFile,
    is_session_name,
    list_node_outputs,
    list_sessions,
)
from nrlprof.tools.progress import ByteMeter, ProgressCallback

ALL_SESSIONS = None  # `sessions` value meaning every session dir


@dataclass
class NodeListing:
    node: NodeInfo
    temp_dir: str = ""
    files: list[RemoteFile] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    rejected: list[dict[str, str]] = field(default_factory=list)
    error: str | None = None


@dataclass
class CollectResult:
    to: str
    sessions: list[str] | None = None  # None: every session dir
    nodes: list[dict[str, Any]] = field(default_factory=list)
    copied: list[FileOutcome] = field(default_factory=list)
    skipped: list[FileOutcome] = field(default_factory=list)
    failed: list[FileOutcome] = field(default_factory=list)
    node_errors: list[NodeError] = field(default_factory=list)
    missing: list[dict[str, str]] = field(default_factory=list)
    rejected: list[dict[str, str]] = field(default_factory=list)  # inputs refused or unreadable: node, path, reason
    bytes_copied: int = 0
    seconds: float = 0.0
    local: bool = False  # read from this machine's Ray temp dir, no cluster joined (collect.local)
    temp_dir: str = ""  # that temp dir
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failed and not self.node_errors and not self.rejected

    @property
    def found_nothing(self) -> bool:
        return not self.copied and not self.skipped and not self.failed

    @property
    def exit_code(self) -> int:
        """PARTIAL when a file, node or input failed or was refused, or when there was nothing to take."""
        return exit_codes.outcome(self.ok and not self.found_nothing)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


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


# --------------------------------------------------------------------------- choosing the job and listing


def choose_sessions(
    nodes: list[NodeInfo], session: str | None, all_sessions: bool, timeout_s: float
) -> list[str] | None:
    """The session dirs to take: the named one, all (None), or the newest holding manifests on any node."""
    if all_sessions:
        return ALL_SESSIONS
    answers = run_on_nodes(list_sessions, nodes, lambda node: (), timeout_s, "listing its session dirs")
    if session is not None:
        found = sorted(
            {s["name"] for a in answers if a.value for s in a.value["sessions"]}
            | {os.path.basename(r["path"]) for a in answers if a.value for r in a.value["rejected"]}
        )  # a refused session is reported by the listing, with the reason
        if session not in found and all(a.error is None for a in answers):
            raise BadInput(f"--session {session!r}: no node has this session dir (found: {', '.join(found) or 'none'})")
        return [session]
    with_manifests = [s["name"] for a in answers if a.value for s in a.value["sessions"] if s["manifests"]]
    current = [a.value["current"] for a in answers if a.value]
    # Session names start with their start time (session_YYYY-MM-DD_hh-mm-ss_...): the largest is the newest.
    chosen = max(with_manifests or current or [""])
    return [chosen] if chosen else []


def list_nodes(
    nodes: list[NodeInfo],
    index: dict[str, dict[str, Any]],
    sessions: list[str] | None,
    allowed_roots: list[str],
    timeout_s: float,
) -> list[NodeListing]:
    """One listing task per node, all at once; a node that fails gets its error, not an exception."""
    answers = run_on_nodes(
        list_node_outputs,
        nodes,
        lambda node: (sessions, allowed_roots, known_sources(index, node)),
        timeout_s,
        "listing its files",
    )
    listings = []
    for answer in answers:
        listing = NodeListing(answer.node, error=answer.error)
        if answer.error is None:
            data = answer.value
            listing.temp_dir = data["temp_dir"]
            listing.files = [RemoteFile(**f) for f in data["files"]]
            listing.missing = data["missing"]
            listing.rejected = data["rejected"]
        listings.append(listing)
    return listings


def node_summary(listing: NodeListing) -> dict[str, Any]:
    """The node (its NodeInfo), its temp dir, how many files and bytes it listed, and its error."""
    sizes = [f.size for f in listing.files]
    found = {"temp_dir": listing.temp_dir, "files": len(sizes), "bytes": sum(sizes), "error": listing.error}
    return {**asdict(listing.node), **found}


def note_listing(result: CollectResult, listing: NodeListing) -> None:
    """The node's summary, and the files its manifests named that were missing or refused, into `result`."""
    label = listing.node.label
    result.nodes.append(node_summary(listing))
    result.missing += [{"node": label, "path": p} for p in listing.missing]
    result.rejected += [{"node": label, **item} for item in listing.rejected]


def split_unchanged(
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


def default_allowed_roots(environ: dict[str, str] | None = None) -> list[str]:
    """The output dirs configured here, as absolute paths: the torch dir (NRL_TORCH_PROFILE_DIR or its default)
    and the memory backend's (NRL_MEMORY_PROFILE_DIR, or the plan's, or its default)."""
    from nrlprof.config.env import load_plan
    from nrlprof.config.memory import DEFAULT_MEMORY_DIR
    from nrlprof.config.plan import MEMORY
    from nrlprof.config.variables import MEMORY_DIR_VARIABLE

    environ = os.environ if environ is None else environ
    plan = load_plan(environ)
    memory = plan.backend(MEMORY)
    memory_dir = (memory.output_dir if memory else None) or environ.get(MEMORY_DIR_VARIABLE, "").strip()
    directories = [plan.torch.directory, memory_dir or DEFAULT_MEMORY_DIR]
    return list(dict.fromkeys(os.path.abspath(os.path.expanduser(d)) for d in directories))


def collect(
    to: Path | str,
    address: str | None = None,
    progress: ProgressCallback | None = None,
    *,
    session: str | None = None,
    all_sessions: bool = False,
    allow_dirs: list[str] | None = None,
    chunk_size: int = CHUNK_SIZE,
    depth: int = PIPELINE_DEPTH,
    list_timeout_s: float = LIST_TIMEOUT_S,
    read_timeout_s: float = READ_TIMEOUT_S,
    after_listing: Callable[[list[NodeListing]], None] | None = None,
) -> CollectResult:
    """Copy one job's nrlprof outputs from every node into `to`; `progress(done_bytes, total_bytes)` as bytes arrive.

    `allow_dirs`: roots (besides the session dirs and the configured torch dir) that files named by manifests may
    lie under. `after_listing` runs between listing and pulling (tests use it to kill a node at that point).
    Raises BadInput for an unwritable `to`, a bad option or an unreachable cluster; node and file failures go in
    the result.
    """
    if chunk_size <= 0 or depth <= 0:
        raise BadInput(f"chunk_size={chunk_size} and depth={depth} must both be > 0")
    if session is not None and all_sessions:
        raise BadInput("--session and --all-sessions exclude each other")
    if session is not None and not is_session_name(session):
        raise BadInput(f"--session {session!r} is not a Ray session dir name (expected session_<date>_<pid>)")
    roots = allowed_roots(allow_dirs)
    transfer = Transfer(chunk_size, depth, list_timeout_s, read_timeout_s)
    started = time.monotonic()
    to = prepare_destination(Path(to))
    with connected(address):
        nodes = alive_nodes()
        sessions = choose_sessions(nodes, session, all_sessions, transfer.list_timeout_s)
        result = CollectResult(to=str(to), sessions=sessions)
        index = load_index(to)
        listings = list_nodes(nodes, index, sessions, roots, transfer.list_timeout_s)
        if after_listing is not None:
            after_listing(listings)
        pull_all(to, listings, index, result, transfer, progress)
        save_index(to, index)
    result.bytes_copied = sum(f.size for f in result.copied)
    result.seconds = round(time.monotonic() - started, 3)
    return result


def allowed_roots(allow_dirs: list[str] | None) -> list[str]:
    """The roots files named by manifests may lie under: the configured torch dir and every `--allow-dir`."""
    return default_allowed_roots() + [_allowed_root(d) for d in allow_dirs or ()]


def _allowed_root(directory: str) -> str:
    path = os.path.abspath(os.path.expanduser(directory))
    if "\0" in directory or path == os.sep:
        raise BadInput(f"--allow-dir {directory!r} is not allowed (expected a directory other than /)")
    return path


def pull_all(
    to: Path,
    listings: list[NodeListing],
    index: dict[str, dict[str, Any]],
    result: CollectResult,
    transfer: Transfer,
    progress: ProgressCallback | None,
) -> None:
    """Pull the changed files of every listed node, the nodes in parallel; fills `result` and `index`."""
    plans = []
    for listing in listings:
        label = listing.node.label
        note_listing(result, listing)
        if listing.error:
            result.node_errors.append(NodeError(label, listing.node.node_id, listing.error))
            continue
        plans.append((listing.node, split_unchanged(to, listing, index, result)))
    meter = ByteMeter(sum(f.size for _, files in plans for f in files), progress)
    with ThreadPoolExecutor(max_workers=max(1, min(8, len(plans)))) as pool:
        pulls = list(pool.map(lambda plan: pull_node(to, *plan, transfer, meter), plans))
    for pull in pulls:
        result.copied += pull.copied
        result.failed += pull.failed
        index.update(pull.entries)
        if pull.error is not None:
            result.node_errors.append(pull.error)


# --------------------------------------------------------------------------- command line
