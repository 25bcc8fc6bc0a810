"""How large a merged timeline will be, before it is written, and whether Perfetto's UI can open it.

The UI runs trace processor in the browser as WebAssembly; Perfetto's documentation ("Visualising large traces",
perfetto.dev/docs/visualization/large-traces) gives the memory a page may use as typically 2 GB, a limit on the
memory the trace takes at run time, not on the file, and that representation as normally larger than the file
(2-4x for uncompressed protobuf traces). A JSON timeline is held as text while it is parsed, on top of the
tables built from it. nrlprof stops at PERFETTO_UI_LIMIT_BYTES of JSON text (a `.gz` timeline: the text inside
it): half the 2 GB the documentation names, the most that 2x, its own lowest inflation, leaves room for. It is
not measured here: the UI and trace processor are downloaded at run time and this project's machines reach no
site but package registries. Past the limit, Perfetto's documentation points to `trace_processor --httpd`, which
the UI uses in place of its in-browser engine.

The estimate: each kept trace's JSON text (a `.gz` trace: the size its gzip trailer gives) times the share of
its steps kept, times OUTPUT_PER_INPUT_BYTE (merge writes each event compactly where kineto indents it).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from nrlprof.tools.merge.select import Selection
from nrlprof.tools.read.traces import TraceHeader

PERFETTO_UI_MEMORY_BYTES = 2 * 1000**3  # "2gb is typical" (Perfetto's docs, Visualising large traces)
PERFETTO_UI_LIMIT_BYTES = PERFETTO_UI_MEMORY_BYTES // 2
# merge's output over kineto's input, per byte of JSON text: 0.79 measured on real torch 2.13 CPU traces (shapes,
# stacks), 0.74 on bench_merge.py's kineto-shaped ones; the estimate takes the larger, rounded up
OUTPUT_PER_INPUT_BYTE = 0.8


def text_size(path: Path) -> int:
    """Bytes of JSON text in a trace file: its size, or for gzip what the trailer says (modulo 2**32, undone)."""
    size = os.path.getsize(path)
    with open(path, "rb") as handle:
        if handle.read(2) != b"\x1f\x8b" or size < 18:
            return size
        handle.seek(-4, os.SEEK_END)
        text = int.from_bytes(handle.read(4), "little")
    while text < size:  # the trailer keeps the size modulo 2**32; text is not smaller than its gzip
        text += 1 << 32
    return text


@dataclass(frozen=True)
class SizedTrace:
    header: TraceHeader
    text_bytes: int  # of JSON text
    disk_bytes: int  # of the file


def estimate(traces: list[SizedTrace], selection: Selection, extra_bytes: int = 0) -> int:
    """The timeline's JSON text, in bytes, for the traces `selection` keeps (and `extra_bytes` of other input)."""
    kept = sum(t.text_bytes * selection.share(t.header) for t in traces if selection.keeps(t.header))
    return int((kept + extra_bytes) * OUTPUT_PER_INPUT_BYTE)


def _largest_fitting(options: list[tuple[str, Selection]], size_of: Callable[[Selection], int], limit: int):
    """The last of `options` (each larger than the one before) whose timeline fits, with its size."""
    best = None
    for option, selection in options:
        size = size_of(selection)
        if 0 < size <= limit:
            best = (option, size)
    return best


def fitting_filters(traces: list[SizedTrace], selection: Selection, limit: int = PERFETTO_UI_LIMIT_BYTES) -> list[str]:
    """Filters that, added to `selection`, give a timeline under `limit`: the most ranks, steps, one worker kind."""
    kept = [t for t in traces if selection.keeps(t.header)]
    size_of = partial(estimate, kept)  # of the timeline with a narrower selection
    found = []
    ranks = sorted({t.header.rank for t in kept if t.header.rank is not None})
    by_ranks = [(f"--ranks {ranks[0]}-{r}" if r != ranks[0] else f"--ranks {r}",
                 Selection(selection.workers, frozenset(ranks[: i + 1]), selection.steps))
                for i, r in enumerate(ranks)]  # fmt: skip
    steps = sorted({s for t in kept for s in t.header.steps if selection.has_step(s)})
    by_steps = [(f"--steps {steps[0]}:{s + 1}" if s != steps[0] else f"--steps {s}",
                 Selection(selection.workers, selection.ranks, ((steps[0], s),)))
                for s in steps if s - steps[0] == steps.index(s)]  # fmt: skip
    for options in (by_ranks, by_steps):
        best = _largest_fitting(options, size_of, limit)
        if best is not None:
            found.append(f"{best[0]} (about {megabytes(best[1])})")
    for worker in sorted({t.header.worker for t in kept}):
        size = size_of(Selection((worker,), selection.ranks, selection.steps))
        if 0 < size <= limit:
            found.append(f"--workers {worker} (about {megabytes(size)})")
    return found


def megabytes(count: float) -> str:
    if count < 1e6:
        return f"{count / 1e3:,.0f} kB"
    return f"{count / 1e6:,.0f} MB" if count < 1e9 else f"{count / 1e9:.1f} GB"


def too_large(estimated: int, suggestions: list[str], limit: int = PERFETTO_UI_LIMIT_BYTES) -> str:
    """The message of a merge stopped by its size."""
    fits = "; ".join(suggestions) if suggestions else "no single filter; combine --workers, --ranks and --steps"
    return (
        f"the merged timeline would hold about {megabytes(estimated)} of JSON, past the {megabytes(limit)} "
        f"Perfetto's UI can open in a browser; these would fit: {fits}; or --force to write it all "
        f"(open it with trace_processor --httpd)"
    )
