"""What a summary's task does on a node: its share of the job's files read into figures (figures.file_set)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from nrlprof.tools.figures.file_set import read_file_set
from nrlprof.tools.figures.trace_pool import read_one
from nrlprof.tools.read.inputs import classify
from nrlprof.tools.read.traces import ReadProgress, TraceHeader
from nrlprof.tools.remote.node_work import NICE, Tally, relay


def read_share(sources: list[str], nice: int = NICE) -> Iterator[dict[str, Any]]:
    """Runs on a node, as a streaming task: progress, then `result`, the share's FileSetFigures."""

    def work(tally: Tally) -> Any:
        def counted(header: TraceHeader, tick: ReadProgress | None) -> Any:
            outcome = read_one(header, tick)
            tally.files += 1
            return outcome

        def progress(done: int, total: int) -> None:
            tally.tick(done)

        return read_file_set(classify(Path(s) for s in sources), progress=progress, jobs=1, reader=counted)

    yield from relay(work, nice)
