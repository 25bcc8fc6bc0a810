"""What a run's manifests add to its summary: windows not ok, listed files missing, and profiler overhead."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nrlprof.tools.read.caught import Caught, caught
from nrlprof.tools.read.traces import is_int

if TYPE_CHECKING:
    from nrlprof.tools.read.anatomy import ProfiledProcess


@dataclass
class Overhead:
    """How long one process took to start and stop its profiler for one window (the manifest's figures), and to
    finish its files beside the next step."""

    worker: str
    rank: int | None
    window: str
    backend: str
    host: str
    pid: int | None
    start_ms: float
    stop_ms: float
    started_at: float = 0.0
    stopped_at: float = 0.0
    status: str = "ok"  # the window's, as the manifest records it
    asked: str = ""  # the request id of a window asked for while the job ran (`nrlprof capture`)
    finish_ms: float = 0.0

    @property
    def label(self) -> str:
        return f"{self.worker} rank {self.rank}" if self.rank is not None else self.worker

    def to_json(self) -> dict[str, Any]:
        row = {"worker": self.worker, "rank": self.rank, "window": self.window, "backend": self.backend,
               "host": self.host, "pid": self.pid, "status": self.status, "start_ms": round(self.start_ms, 3),
               "stop_ms": round(self.stop_ms, 3), "finish_ms": round(self.finish_ms, 3)}  # fmt: skip
        return {**row, "asked": self.asked} if self.asked else row


@dataclass
class ManifestView:
    notes: list[str] = field(default_factory=list)
    unreadable: list[tuple[Path, str]] = field(default_factory=list)
    overhead: list[Overhead] = field(default_factory=list)
    rank_of_file: dict[str, int] = field(default_factory=dict)
    # The slow steps a job armed for them caught: the windows they opened, or their kept traces.
    caught: list[Caught] = field(default_factory=list)


@dataclass
class LoadedManifest:
    """One manifest's lines as parsed (`manifest.parse_line`: a record, or why the line is none), or why it
    cannot be read at all."""

    path: Path
    lines: list[Any] = field(default_factory=list)
    error: str | None = None


def load_manifest(path: Path) -> LoadedManifest:
    from nrlprof.manifest import parse_line

    try:
        with open(path, "rb") as handle:
            return LoadedManifest(path, [parse_line(raw) for raw in handle])
    except OSError as exc:
        return LoadedManifest(path, error=f"manifest cannot be read ({type(exc).__name__}: {exc})")


def manifest_processes(manifests: list[LoadedManifest]) -> list[ProfiledProcess]:
    """(host, pid, worker, rank) of every process the manifests record a window of."""
    found: list[ProfiledProcess] = []
    for manifest in manifests:
        for record in manifest.lines:
            if isinstance(record, dict) and isinstance(record.get("worker"), str):
                rank = record.get("rank")
                found.append((record.get("host"), record.get("pid"), record["worker"],
                              rank if isinstance(rank, int) else None))  # fmt: skip
    return found


def manifest_view(manifests: list[LoadedManifest], present: set[str]) -> ManifestView:
    """Windows the manifests record as not ok or with a message, listed files missing, overhead.

    `present`: the names of the files there are (a run directory's, or every node's). A backend none of whose
    listed files is present (say nsys reports, when the inputs hold only the torch traces) is not reported as
    missing: those files were never meant to be here. Manifests (or records) that cannot be read are returned
    with the reason.
    """
    from nrlprof.manifest import NOT_UTF8

    view = ManifestView()
    records: list[tuple[Path, dict[str, Any]]] = []
    for loaded in manifests:
        manifest, parsed = loaded.path, loaded.lines
        if loaded.error is not None:
            view.unreadable.append((manifest, loaded.error))
            continue
        not_text = parsed.count(NOT_UTF8)
        if not_text:
            view.unreadable.append((manifest, f"{not_text} line(s) not UTF-8 text, skipped"))
        for record in parsed:
            if not isinstance(record, dict):  # not JSON, not an object, a torn last line: no record
                continue
            files = record.get("files")
            if files is not None and not (isinstance(files, list) and all(isinstance(f, str) for f in files)):
                worker = str(record.get("worker", "?"))[:80]
                reason = f"record of {worker}: files is {str(files)[:80]}, expected a list of paths"
                view.unreadable.append((manifest, reason))
                continue
            records.append((manifest, record))
    view.caught = caught(record for _, record in records)
    found_backends = {
        str(r.get("backend")) for _, r in records if any(Path(f).name in present for f in r.get("files") or [])
    }
    for manifest, record in records:
        rank = record.get("rank") if is_int(record.get("rank")) else None
        if rank is not None:
            view.rank_of_file.update((Path(name).name, rank) for name in record.get("files") or [])
        overhead = _overhead(record, rank)
        if overhead is not None:
            view.overhead.append(overhead)
        where = f"{record.get('worker', '?')} rank {record.get('rank')} window {record.get('window', '?')}"
        where += f" ({record.get('backend', '?')}, {record.get('host', '?')} pid {record.get('pid', '?')})"
        message = f": {record['message']}" if record.get("message") else ""
        if record.get("status", "ok") != "ok":
            view.notes.append(f"{where}: {record.get('status')}{message}")
            continue
        if message:  # files written, with something to know about them (names repaired, figures only, ...)
            view.notes.append(f"{where}: ok{message}")
        missing = [Path(f).name for f in record.get("files") or [] if Path(f).name not in present]
        if missing and str(record.get("backend")) in found_backends:
            view.notes.append(f"{where}: listed in {manifest.name} but not found here: {', '.join(missing)}")
    return view


def _overhead(record: dict[str, Any], rank: int | None) -> Overhead | None:
    values = [record.get(k) for k in ("start_ms", "stop_ms", "started_at", "stopped_at")]
    if not all(_is_number(v) and 0 <= v < 1e12 for v in values[:2]):
        return None
    if not values[0] and not values[1]:
        return None
    times = [float(v) if _is_number(v) else 0.0 for v in values[2:]]
    pid = record.get("pid") if is_int(record.get("pid")) else None
    worker, window = str(record.get("worker", "?")), str(record.get("window", ""))
    backend, host = str(record.get("backend", "?")), str(record.get("host", "?"))
    status = str(record.get("status", "ok"))
    asked = record.get("asked") if isinstance(record.get("asked"), str) else ""
    finish = record.get("finish_ms")
    finish_ms = float(finish) if _is_number(finish) and 0 <= finish < 1e12 else 0.0
    return Overhead(worker, rank, window, backend, host, pid, float(values[0]), float(values[1]), *times, status,
                    asked, finish_ms)  # fmt: skip


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
