"""`nrlprof collect` with no cluster: one job's files from this machine's Ray session dirs, copied here.

A job that started Ray itself (`ray.init()` on one machine) shuts its cluster down when it ends, but its files
stay on this machine: the Ray temp dir (`$RAY_TMPDIR/ray`, else `$TMPDIR/ray`, else `/tmp/ray`, as Ray chooses
it; `--temp-dir` names another) and the output dirs its manifests name. This route takes them by the rule of
the cluster route (collect.scan): the session dir chosen the same way (`--session`, `--all-sessions`, else the
newest one holding nrlprof manifests), its reports and manifests, the files its manifests name under the
allowed dirs, no symbolic link followed. It also takes the step-anatomy runs of the session's driver: the
`run-*-<pid>` dirs of the step-anatomy dir configured here (NRL_STEP_ANATOMY_DIR, else `./step_anatomy`) whose
pid is the one the session dir's name ends with (the process that started Ray: the driver, for `ray.init()`).

Files are copied into `DIR/<this machine>/...` as from a node of a cluster (the anatomy runs into
`DIR/<this machine>/step_anatomy/<run>/`), each checked against the sha256 it was listed with, given the
source's permission bits, written under a temporary name and renamed into place; the index is the same.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping
from pathlib import Path

from nrlprof.anatomy.files import RUN_PREFIX
from nrlprof.tools.cluster import BadInput, FileFailed, NodeInfo, node_dir_name
from nrlprof.tools.collect.collector import (
    ALL_SESSIONS,
    CollectResult,
    NodeListing,
    allowed_roots,
    note_listing,
    prepare_destination,
    split_unchanged,
)
from nrlprof.tools.collect.index import known_sources, load_index, save_index
from nrlprof.tools.collect.pull import CHUNK_SIZE, FileOutcome, index_entry, make_parents, safe_key, write_checked
from nrlprof.tools.collect.scan import (
    RemoteFile,
    describe_files,
    is_session_name,
    scan_outputs,
    session_listing,
    take_tree,
)
from nrlprof.tools.progress import ByteMeter, ProgressCallback

ANATOMY_DEST = "step_anatomy"


def ray_temp_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Ray's temp dir on this machine, chosen as Ray chooses it (ray._common.utils.get_default_ray_temp_dir)."""
    environ = os.environ if environ is None else environ
    system = environ.get("RAY_TMPDIR") or environ.get("TMPDIR") or "/tmp"
    return Path(system) / "ray"


def this_machine() -> NodeInfo:
    host = socket.gethostname()
    return NodeInfo("", host, "", node_dir_name(host))


def choose_local_sessions(temp_dir: Path, session: str | None, all_sessions: bool) -> tuple[list[str] | None, str]:
    """The session dirs to take (None: all) and, when none is taken, why."""
    if not temp_dir.is_dir():
        raise BadInput(f"no Ray temp dir at {temp_dir} (set RAY_TMPDIR, or pass --temp-dir as given to `ray start`)")
    if all_sessions:
        return ALL_SESSIONS, ""
    listing = session_listing(str(temp_dir))
    names = sorted(s["name"] for s in listing["sessions"])
    if session is not None:
        if not is_session_name(session):
            raise BadInput(f"--session {session!r} is not a Ray session dir name (expected session_<date>_<pid>)")
        refused = {os.path.basename(r["path"]) for r in listing["rejected"]}
        if session not in names and session not in refused:
            found = ", ".join(names) or "none"
            raise BadInput(f"--session {session!r}: no such session dir in {temp_dir} (found: {found})")
        return [session], ""
    with_manifests = [s["name"] for s in listing["sessions"] if s["manifests"]]
    if not with_manifests:
        why = f"none of the {len(names)} session dir(s) in {temp_dir} holds nrlprof manifests"
        return [], why + " (--session NAME or --all-sessions takes others)"
    return [max(with_manifests)], ""  # names start with their start time: the largest is the newest


def session_pid(name: str) -> str | None:
    """The pid a session dir's name ends with (`session_2026-11-25_00-27-28_517043_16198` -> `16198`)."""
    pid = name.rpartition("_")[2]
    return pid if pid.isdigit() else None


def anatomy_runs_of(sessions: list[str] | None, temp_dir: Path, anatomy_dir: Path) -> list[Path]:
    """The step-anatomy runs of the drivers that started the chosen sessions (all sessions: all runs)."""
    if not anatomy_dir.is_dir():
        return []
    pids = None if sessions is None else {pid for pid in map(session_pid, sessions) if pid}
    runs = sorted(anatomy_dir.glob(RUN_PREFIX + "*"))
    return [run for run in runs if pids is None or run.name.rpartition("-")[2] in pids]  # run-...-<pid>


def list_this_machine(
    temp_dir: Path, sessions: list[str] | None, roots: list[str], anatomy_dir: Path, known: dict[str, list]
) -> NodeListing:
    listing = NodeListing(this_machine(), temp_dir=str(temp_dir))
    scan = scan_outputs(str(temp_dir), sessions, roots)
    for run in anatomy_runs_of(sessions, temp_dir, anatomy_dir):
        take_tree(run, scan, [str(anatomy_dir)], f"{ANATOMY_DEST}/{run.name}")
    listing.files = describe_files(scan.found, known)
    listing.missing, listing.rejected = scan.missing, scan.rejected
    return listing


def copy_file(file: RemoteFile, local: Path, meter: ByteMeter) -> None:
    """Copy `file` to `local` through a temporary part, checked against the size and sha256 it was listed with."""
    try:
        source = os.open(file.source, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise FileFailed(f"{file.source} vanished before it was copied") from None
    with os.fdopen(source, "rb") as reader:
        chunks = (reader.read(min(CHUNK_SIZE, file.size - offset)) for offset in range(0, file.size, CHUNK_SIZE))
        write_checked(file, local, chunks, CHUNK_SIZE, meter)  # its first `size` bytes, as a node's stream sends


def collect_local(
    to: Path | str,
    progress: ProgressCallback | None = None,
    *,
    session: str | None = None,
    all_sessions: bool = False,
    allow_dirs: list[str] | None = None,
    temp_dir: Path | str | None = None,
    anatomy_dir: Path | str | None = None,
) -> CollectResult:
    """Copy one job's nrlprof outputs from this machine's Ray temp dir (and the dirs its manifests name) into `to`.

    Raises BadInput for an unwritable `to`, a bad option or no Ray temp dir; file failures go in the result.
    """
    from nrlprof.anatomy.settings import anatomy_settings

    if session is not None and all_sessions:
        raise BadInput("--session and --all-sessions exclude each other")
    started = time.monotonic()
    roots = allowed_roots(allow_dirs)
    temp = Path(temp_dir).expanduser().absolute() if temp_dir is not None else ray_temp_dir()
    if anatomy_dir is None:
        anatomy_dir = anatomy_settings(os.environ, backends_configured=False).directory
    anatomy = Path(anatomy_dir).expanduser().absolute()
    to = prepare_destination(Path(to))
    sessions, why_none = choose_local_sessions(temp, session, all_sessions)
    result = CollectResult(to=str(to), sessions=sessions, local=True, temp_dir=str(temp))
    if why_none:
        result.notes.append(why_none)
    index = load_index(to)
    listing = NodeListing(this_machine(), temp_dir=str(temp))
    if sessions is None or sessions:
        listing = list_this_machine(temp, sessions, roots, anatomy, known_sources(index, listing.node))
    copy_listing(to, listing, index, result, progress)
    save_index(to, index)
    result.bytes_copied = sum(f.size for f in result.copied)
    result.seconds = round(time.monotonic() - started, 3)
    return result


def copy_listing(
    to: Path,
    listing: NodeListing,
    index: dict[str, dict],
    result: CollectResult,
    progress: ProgressCallback | None,
) -> None:
    """Copy the changed files of this machine's listing; fills `result` and `index`."""
    node, label = listing.node, listing.node.label
    note_listing(result, listing)
    changed = split_unchanged(to, listing, index, result)
    meter = ByteMeter(sum(f.size for f in changed), progress)
    for file in changed:
        key = f"{label}/{file.dest}"
        try:
            key = safe_key(label, file.dest)
            copy_file(file, make_parents(to, key), meter)
        except FileFailed as err:
            result.failed.append(FileOutcome(label, key, file.size, str(err)))
            continue
        except OSError as err:
            result.failed.append(FileOutcome(label, key, file.size, f"writing {to / key}: {err.strerror or err}"))
            continue
        result.copied.append(FileOutcome(label, key, file.size))
        index[key] = index_entry(node, file)
