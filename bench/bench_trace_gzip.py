"""Benchmark the part of a torch window's stop that compresses its trace (NRL_TORCH_PROFILE_GZIP=1).

    python bench/bench_trace_gzip.py                 # a ~30 MB trace, best of 3
    python bench/bench_trace_gzip.py --steps 120 --repeat 5

Records a real torch trace on CPU (a small MLP trained for `--steps` steps, shapes and stacks recorded), then
writes it as the stop does (`_write_valid`: names checked, compressed, moved into place) three ways in one run:
uncompressed, at nrlprof's level (TRACE_GZIP_LEVEL) and at gzip's default level 9 (what the stop used before).
Prints each one's time (CPU seconds, best of `--repeat`), throughput over the uncompressed text and the file's
size against it. The stop runs in the worker's step, so its time is the figure that counts.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def record_trace(path: Path, steps: int) -> None:
    import torch

    model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(8)])
    optimizer = torch.optim.Adam(model.parameters())
    with torch.profiler.profile(record_shapes=True, with_stack=True) as profiler:
        for _ in range(steps):
            model(torch.randn(32, 64)).sum().backward()
            optimizer.step()
            optimizer.zero_grad()
    profiler.export_chrome_trace(str(path))


def timed_write(source: Path, work: Path, compress: bool, level: int, repeat: int) -> tuple[float, int]:
    """(best CPU seconds of the stop's write, size of the file written)."""
    from nrlprof.backends import torch_profiler

    torch_profiler.TRACE_GZIP_LEVEL = level
    best, size = float("inf"), 0
    for index in range(repeat):
        exported = work / f".trace{index}.partial"
        target = work / (f"trace{index}.pt.trace.json" + (".gz" if compress else ""))
        shutil.copyfile(source, exported)
        began = time.process_time()
        torch_profiler._write_valid(exported, target, compress)
        best = min(best, time.process_time() - began)
        size = target.stat().st_size
        target.unlink()
    return best, size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=60, help="training steps recorded (60: about 30 MB)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from nrlprof.backends.torch_profiler import TRACE_GZIP_LEVEL

    with tempfile.TemporaryDirectory(prefix="nrlprof-bench-gzip-") as tmp:
        work = Path(tmp)
        source = work / "source.json"
        record_trace(source, args.steps)
        text_mb = source.stat().st_size / 1e6
        print(f"torch trace of {args.steps} steps (CPU, shapes and stacks): {text_mb:.1f} MB of text")
        rows = [
            ("uncompressed", False, TRACE_GZIP_LEVEL),
            (f"gzip level {TRACE_GZIP_LEVEL} (nrlprof)", True, TRACE_GZIP_LEVEL),
            ("gzip level 9 (gzip's default)", True, 9),
        ]
        results = {}
        for label, compress, level in rows:
            seconds, size = timed_write(source, work, compress, level, args.repeat)
            results[label] = seconds
            print(f"{label:32s} {seconds * 1000:8.0f} ms CPU {text_mb / seconds:7.0f} MB/s   "
                  f"file {size / 1e6:6.1f} MB ({size / source.stat().st_size:.3f} of the text)")  # fmt: skip
        ours, default = results[rows[1][0]], results[rows[2][0]]
        print(f"the stop's compression: {default / ours:.1f}x faster than gzip's default level")
    return 0


if __name__ == "__main__":
    sys.exit(main())
