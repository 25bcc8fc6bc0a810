"""A folder Holistic Trace Analysis can load: one trace per rank of one worker and window.

HTA's `TraceAnalysis(trace_dir=...)` lists only the files directly in `trace_dir` and keys them by the
first `"rank": N` in each, so a rank directory (`$DIR/<worker>/<rank>/`) with a single window loads as is,
but a worker directory (ranks in subdirectories, and maybe several windows per rank) does not.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from nrlprof.errors import ToolError
from nrlprof.layout import TRACE_SUFFIXES
from nrlprof.tools.traces import TraceHeader, find_traces


def hta_folder(worker_dir: Path, window: str | None = None, dest: Path | None = None) -> Path:
    """A directory of links `rank<r>.pt.trace.json[.gz]` to the traces of `window` under `worker_dir`.

    `window` (such as "3-4") may be left out when the traces hold a single window. The links go into
    `dest`, created if needed, or into a new temporary directory; files are copied where links fail.
    """
    headers, _ = find_traces([Path(worker_dir)])
    headers = [h for h in headers if h.rank is not None]
    if not headers:
        raise ToolError("no torch trace with a rank found", worker_dir)
    windows = sorted({h.window for h in headers})
    if window is None:
        if len(windows) > 1:
            raise ToolError(f"traces of several windows ({', '.join(windows)}): choose one", worker_dir)
        window = windows[0]
    chosen = [h for h in headers if h.window == window]
    if not chosen:
        raise ToolError(f"no trace of window {window!r} (there are: {', '.join(windows)})", worker_dir)
    by_rank: dict[int, TraceHeader] = {}
    for header in chosen:
        if header.rank in by_rank:
            others = f"{by_rank[header.rank].path} and {header.path}"
            raise ToolError(f"two traces of rank {header.rank} in window {window}: {others}", worker_dir)
        by_rank[header.rank] = header
    folder = Path(dest) if dest is not None else Path(tempfile.mkdtemp(prefix="nrlprof-hta-"))
    folder.mkdir(parents=True, exist_ok=True)
    for rank, header in sorted(by_rank.items()):
        suffix = next(s for s in reversed(TRACE_SUFFIXES) if header.path.name.endswith(s))
        link = folder / f"rank{rank}{suffix}"
        link.unlink(missing_ok=True)
        try:
            os.symlink(header.path.resolve(), link)
        except OSError:
            shutil.copyfile(header.path, link)
    return folder
