"""Benchmark `nrlprof.annotate` against the same code without it, and against calling NVTX / torch directly.

    python bench/bench_annotate.py
    python bench/bench_annotate.py --number 20000 --repeat 5

Inactive (no window open in this process, the normal case): a function doing about 20 us of work,
decorated, against the plain function (target: within 5%), and the absolute cost in ns per call on an
empty function and for the context-manager form. Active: a window open in this process (`window_open_here`: the
process's session holds it), `@nrlprof.annotate` against `@nvtx.annotate` (nsys window), and against
`torch.profiler.record_function` under a running torch profiler (torch window). Timings are the best of
`--repeat` timeit runs, the variants of one comparison interleaved so machine load hits them alike.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
import timeit
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import SimpleNamespace

import nvtx

import nrlprof
from nrlprof.process import state
from nrlprof.process.state import OpenWindows
from nrlprof.ranges.annotate import wrap

WORK_TARGET_US = 20.0


@contextlib.contextmanager
def window_open_here(kind: str) -> Iterator[None]:
    """A window of `kind` open in this process, as a matched worker's session holds it during a window."""
    windows = OpenWindows()
    windows.opened(kind, 1)
    state.session = SimpleNamespace(windows=windows)
    try:
        yield
    finally:
        state.session = None


@dataclass
class Row:
    figure: str
    value_ns: float
    baseline: str
    baseline_ns: float
    target: str = ""

    def cells(self) -> tuple[str, ...]:
        delta = self.value_ns - self.baseline_ns
        ratio = self.value_ns / self.baseline_ns if self.baseline_ns else float("nan")
        return (
            self.figure,
            _fmt(self.value_ns),
            f"{self.baseline} {_fmt(self.baseline_ns)}",
            f"{delta:+.0f} ns ({ratio:.3f}x)",
            self.target,
        )


def _fmt(ns: float) -> str:
    return f"{ns / 1000:.2f} us" if ns >= 10_000 else f"{ns:.0f} ns"


def busy(iterations: int) -> int:
    total = 0
    for i in range(iterations):
        total += i * i
    return total


def calibrate() -> int:
    """Loop count that makes `busy` take about WORK_TARGET_US (two passes: the first also warms up)."""
    loops = 2000
    for _ in range(2):
        seconds = min(timeit.repeat(lambda n=loops: busy(n), number=200, repeat=5)) / 200
        loops = max(1, round(loops * WORK_TARGET_US * 1e-6 / seconds))
    return loops


def compare(functions: dict[str, Callable[[], object]], number: int, repeat: int) -> dict[str, float]:
    """Best ns per call of each function, timed in turn `repeat` times."""
    best = dict.fromkeys(functions, float("inf"))
    for _ in range(repeat):
        for name, function in functions.items():
            seconds = timeit.timeit(function, number=number)
            best[name] = min(best[name], seconds / number * 1e9)
    return best


def inactive_rows(loops: int, number: int, repeat: int) -> list[Row]:
    def work() -> int:
        return busy(loops)

    def empty() -> None:
        pass

    annotated_work = nrlprof.annotate("bench.work")(work)
    annotated_empty = nrlprof.annotate("bench.empty")(empty)
    context = nrlprof.annotate("bench.with")

    def with_block() -> None:
        with context:
            pass

    def two(a: int, b: int = 1) -> None:
        pass

    annotated_two = nrlprof.annotate("bench.two")(two)
    generic_two = wrap(two, "bench.generic", None, exact=False)

    def call_two() -> None:
        two(1)

    def call_annotated_two() -> None:
        annotated_two(1)

    def call_generic_two() -> None:
        generic_two(1)

    heavy = compare({"plain": work, "annotated": annotated_work}, max(1, number // 200), repeat * 4)
    light = compare({"plain": empty, "annotated": annotated_empty, "with": with_block}, number, repeat)
    args = compare({"plain": call_two, "annotated": call_annotated_two, "generic": call_generic_two}, number, repeat)
    return [
        Row("@annotate, ~20 us function, inactive", heavy["annotated"], "plain", heavy["plain"], "within 5%"),
        Row("@annotate, empty function, inactive", light["annotated"], "plain", light["plain"], "+250 ns"),
        Row("@annotate, f(a, b=1) called f(1), inactive", args["annotated"], "plain", args["plain"], "+250 ns"),
        Row("  same, *args/**kwargs wrapper (before)", args["generic"], "plain", args["plain"]),
        Row("with annotate(...): pass, inactive", light["with"], "pass in a function", light["plain"]),
    ]


def nsys_rows(loops: int, number: int, repeat: int) -> list[Row]:
    def empty() -> None:
        pass

    def work() -> int:
        return busy(loops)

    def push_pop() -> None:
        nvtx.push_range(message="bench.empty", domain="nrlprof")
        try:
            pass
        finally:
            nvtx.pop_range(domain="nrlprof")

    ours_empty = nrlprof.annotate("bench.empty")(empty)
    theirs_empty = nvtx.annotate("bench.empty", domain="nrlprof")(empty)
    ours_work, theirs_work = nrlprof.annotate("bench.work")(work), nvtx.annotate("bench.work", domain="nrlprof")(work)
    with window_open_here("nsys"):
        light = compare({"ours": ours_empty, "nvtx": theirs_empty, "push_pop": push_pop}, number, repeat)
        heavy = compare({"ours": ours_work, "nvtx": theirs_work}, max(1, number // 200), repeat * 4)
    return [
        Row("@annotate, empty function, nsys window", light["ours"], "@nvtx.annotate", light["nvtx"]),
        Row("  same", light["ours"], "nvtx.push_range/pop_range", light["push_pop"]),
        Row("@annotate, ~20 us function, nsys window", heavy["ours"], "@nvtx.annotate", heavy["nvtx"]),
    ]


def torch_rows(number: int, repeat: int) -> list[Row]:
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")  # kineto's profiler_start/stop lines
    import torch.profiler

    def empty() -> None:
        pass

    ours = nrlprof.annotate("bench.empty")(empty)

    def direct() -> None:
        with torch.profiler.record_function("bench.empty"):
            pass

    profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
    profiler.start()
    try:
        with window_open_here("torch"):
            times = compare({"ours": ours, "direct": direct}, number, repeat)
    finally:
        profiler.stop()
    return [Row("@annotate, empty function, torch window", times["ours"], "record_function", times["direct"])]


def print_table(rows: list[Row]) -> None:
    header = ("figure", "per call", "baseline (same run)", "difference", "target")
    cells = [header, *(row.cells() for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(5)]
    for row in cells:
        print("  ".join(cell.ljust(widths[i]) if i in (0, 2) else cell.rjust(widths[i]) for i, cell in enumerate(row)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--number", type=int, default=500_000, help="calls per timing of the light cases")
    parser.add_argument("--repeat", type=int, default=7, help="timings per case; the best is kept")
    parser.add_argument("--torch-number", type=int, default=20_000, help="calls per timing under the torch profiler")
    args = parser.parse_args()
    if nrlprof.is_active() or state.session is not None:
        raise SystemExit("unset the NRL_* variables: this benchmark needs nrlprof inactive")
    began = time.perf_counter()
    loops = calibrate()
    rows = inactive_rows(loops, args.number, args.repeat)
    rows += nsys_rows(loops, args.number, args.repeat)
    rows += torch_rows(args.torch_number, args.repeat)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"nrlprof.annotate benchmark ({time.perf_counter() - began:.0f} s; work loop {loops} iterations; "
        f"load average {load})"
    )
    print_table(rows)
    if type(nvtx.get_domain("nrlprof")).__name__ == "DummyDomain":
        print("(no NVTX tool attached: nvtx domains are no-ops and @nvtx.annotate returns the function unchanged)")
    heavy = rows[0]
    overhead = heavy.value_ns / heavy.baseline_ns - 1
    verdict = "met" if overhead < 0.05 else "MISSED"
    empty_ns = rows[1].value_ns - rows[1].baseline_ns
    print(
        f"\ninactive overhead: {overhead:+.1%} on a ~20 us function (target within 5%: {verdict}); "
        f"{empty_ns:+.0f} ns a call"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
