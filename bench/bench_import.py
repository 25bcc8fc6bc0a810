"""Benchmark the cost of `import nrlprof`, unconfigured and configured, against a baseline in the same run.

    python bench/bench_import.py               # 40 interleaved runs of each case
    python bench/bench_import.py --runs 10

Unconfigured (no NRL_* variable): `import nrlprof` against `python -c pass`; target < 5 ms extra, and
neither ray nor torch imported. Configured (NRL_NSYS_* and NRL_TORCH_*): `import ray; import nrlprof`
against `import ray`, so Ray's own import is not counted. Each case is timed two ways: the wall time of
the whole interpreter run, and the import alone measured inside the process; the figure is the median
over runs, the cases interleaved so that machine load hits them alike. `python -X importtime` then
lists the slowest modules that `import nrlprof` loads.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_MS = 5.0
TIMED_IMPORT = (
    "import time, sys\n"
    "{pre}\n"
    "began = time.perf_counter()\n"
    "{body}\n"
    "elapsed = time.perf_counter() - began\n"
    "print(elapsed, 'ray' in sys.modules, 'torch' in sys.modules)\n"
)
CONFIGURED_ENV = {
    "NRL_NSYS_WORKER_PATTERNS": "*policy*",
    "NRL_NSYS_PROFILE_STEP_RANGE": "3:5",
    "NRL_TORCH_PROFILE_WORKER_PATTERNS": "*policy*,*generation*",
    "NRL_TORCH_PROFILE_STEP_RANGE": "3:5",
}


@dataclass
class Case:
    name: str
    pre: str
    body: str
    env: dict[str, str]
    wall_s: list[float] = field(default_factory=list)
    import_s: list[float] = field(default_factory=list)
    imported_ray: bool = False
    imported_torch: bool = False

    def run_once(self, cwd: str) -> None:
        code = TIMED_IMPORT.format(pre=self.pre, body=self.body)
        began = time.perf_counter()
        result = subprocess.run([sys.executable, "-c", code], env=self.env, cwd=cwd, capture_output=True, text=True)
        self.wall_s.append(time.perf_counter() - began)
        if result.returncode != 0:
            raise RuntimeError(f"{self.name} failed:\n{result.stderr}")
        elapsed, ray_seen, torch_seen = result.stdout.split()[-3:]
        self.import_s.append(float(elapsed))
        self.imported_ray, self.imported_torch = ray_seen == "True", torch_seen == "True"

    @property
    def wall_ms(self) -> float:
        return statistics.median(self.wall_s) * 1000

    @property
    def import_ms(self) -> float:
        return statistics.median(self.import_s) * 1000


def clean_env(trace_dir: str, configured: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NRL_", "NRLPROF_"))}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    if configured:
        env.update(CONFIGURED_ENV, NRL_TORCH_PROFILE_DIR=trace_dir)
    return env


def make_cases(trace_dir: str) -> dict[str, Case]:
    bare, configured = clean_env(trace_dir, False), clean_env(trace_dir, True)
    return {
        "bare": Case("python -c pass", "", "pass", bare),
        "unconfigured": Case("import nrlprof (nothing set)", "", "import nrlprof", bare),
        "ray": Case("import ray (variables set)", "", "import ray", configured),
        "configured": Case("import ray; import nrlprof (variables set)", "import ray", "import nrlprof", configured),
    }


def measure(cases: dict[str, Case], runs: int, cwd: str) -> None:
    for case in cases.values():  # warm the file cache
        case.run_once(cwd)
        case.wall_s.clear()
        case.import_s.clear()
    for _ in range(runs):
        for case in cases.values():
            case.run_once(cwd)


def importtime(env: dict[str, str], pre: str, cwd: str) -> list[tuple[int, int, str]]:
    """(self us, cumulative us, module) for every module `import nrlprof` loads, run after `pre`."""
    code = f"{pre}\nimport nrlprof" if pre else "import nrlprof"
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code], env=env, cwd=cwd, capture_output=True, text=True
    )
    rows = []
    for line in result.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cumulative_us, raw_name = line[len("import time:") :].split("|")
        depth = (len(raw_name) - len(raw_name.lstrip()) - 1) // 2
        rows.append((int(self_us), int(cumulative_us), depth, raw_name.strip()))
    return nrlprof_subtree(rows)


def nrlprof_subtree(rows: list[tuple[int, int, int, str]]) -> list[tuple[int, int, str]]:
    """The rows of the top-level `nrlprof` import and everything under it (printed before it)."""
    end = max(i for i, row in enumerate(rows) if row[2] == 0 and row[3] == "nrlprof")
    start = max((i for i, row in enumerate(rows[:end]) if row[2] == 0), default=-1) + 1
    return [(self_us, cumulative_us, name) for self_us, cumulative_us, _, name in rows[start : end + 1]]


def print_importtime(title: str, rows: list[tuple[int, int, str]], top: int) -> None:
    total = rows[-1][1]
    ours = [row for row in rows if row[2].startswith("nrlprof")]
    others = [row for row in rows if not row[2].startswith("nrlprof")]
    print(f"\n{title}: import nrlprof {total / 1000:.1f} ms cumulative (-X importtime), {len(rows)} modules loaded")
    print(f"  nrlprof modules by self time (top {top}):")
    for self_us, cumulative_us, name in sorted(ours, reverse=True)[:top]:
        print(f"    {self_us / 1000:7.2f} ms self {cumulative_us / 1000:7.2f} ms cum  {name}")
    if others:
        print(f"  other modules it loads, by self time (top {top}):")
        for self_us, cumulative_us, name in sorted(others, reverse=True)[:top]:
            print(f"    {self_us / 1000:7.2f} ms self {cumulative_us / 1000:7.2f} ms cum  {name}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=40, help="interpreter runs per case (default 40)")
    parser.add_argument("--top", type=int, default=8, help="modules listed from -X importtime (default 8)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nrlprof-bench-import-") as work:
        trace_dir = str(Path(work) / "traces")
        cases = make_cases(trace_dir)
        began = time.perf_counter()
        measure(cases, args.runs, work)
        seconds = time.perf_counter() - began
        print_importtime("Nothing set", importtime(cases["unconfigured"].env, "", work), args.top)
        print_importtime("Variables set, ray imported first", importtime(cases["configured"].env, "import ray", work), args.top)
    unconfigured_extra = cases["unconfigured"].wall_ms - cases["bare"].wall_ms
    configured_extra = cases["configured"].wall_ms - cases["ray"].wall_ms
    print(f"\nMedians of {args.runs} interleaved runs per case ({seconds:.0f} s), Python {sys.version.split()[0]}")
    print(f"{'case':46} {'process wall ms':>16} {'import ms':>10}")
    for case in cases.values():
        print(f"{case.name:46} {case.wall_ms:16.1f} {case.import_ms:10.2f}")
    print()
    print(f"{'figure':56} {'value':>10} {'target':>10}")
    print(f"{'import nrlprof, nothing set: extra wall time vs pass':56} {unconfigured_extra:8.1f}ms {'< 5 ms':>10}")
    print(f"{'import nrlprof, nothing set: in-process import time':56} {cases['unconfigured'].import_ms:8.2f}ms {'< 5 ms':>10}")
    print(
        f"{'  ratio of wall time to python -c pass':56} {cases['unconfigured'].wall_ms / cases['bare'].wall_ms:9.3f}x"
    )
    print(
        f"{'  ray / torch imported with nothing set':56} "
        f"{str(cases['unconfigured'].imported_ray) + ' / ' + str(cases['unconfigured'].imported_torch):>10} {'no / no':>10}"
    )
    print(f"{'import nrlprof, variables set: extra wall vs import ray':56} {configured_extra:8.1f}ms")
    print(f"{'import nrlprof, variables set: in-process (after ray)':56} {cases['configured'].import_ms:8.2f}ms")
    print(f"{'  ratio of wall time to import ray':56} {cases['configured'].wall_ms / cases['ray'].wall_ms:9.3f}x")
    print(f"{'  torch imported with variables set':56} {cases['configured'].imported_torch!s:>10} {'no':>10}")
    ok = unconfigured_extra < TARGET_MS and not cases["unconfigured"].imported_ray
    print(f"\nunconfigured import target (< {TARGET_MS:.0f} ms extra, no ray): {'met' if ok else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
