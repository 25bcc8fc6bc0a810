"""Benchmark the cost of `import nrlprof`, unconfigured and configured, against a baseline in the same run.

    python bench/bench_import.py                            # 40 interleaved runs (15 of those importing ray)
    python bench/bench_import.py --runs 10 --ray-runs 5

Unconfigured (no NRL_* variable): `import nrlprof` against `python -c pass`; target < 5 ms extra, and
neither ray nor torch imported. Configured (NRL_NSYS_* and NRL_TORCH_*): `import ray` with the variables set
(the start-up hook activates nrlprof before the program's code; its Ray hooks install when ray is imported)
against `import ray` with nothing set, so Ray's own import is not counted. Each case is timed for the whole interpreter
run and for the import alone (inside the process), each as wall time and as CPU time; CPU time hardly
moves with the load of other processes, so the verdict uses it. Figures are medians over runs, the cases
interleaved so that machine load hits them alike. `python -X importtime` then lists the slowest modules
that `import nrlprof` loads.
"""

from __future__ import annotations

import argparse
import os
import resource
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
    "began, began_cpu = time.perf_counter(), time.process_time()\n"
    "{body}\n"
    "elapsed, cpu = time.perf_counter() - began, time.process_time() - began_cpu\n"
    "print(elapsed, cpu, 'ray' in sys.modules, 'torch' in sys.modules)\n"
)
RAY_CASES = ("ray", "configured")
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
    # seconds per run: the whole interpreter (wall, CPU) and the timed import alone (wall, CPU)
    samples: dict[str, list[float]] = field(
        default_factory=lambda: {"wall": [], "cpu": [], "import": [], "import_cpu": []}
    )
    imported_ray: bool = False
    imported_torch: bool = False

    def run_once(self, cwd: str) -> None:
        code = TIMED_IMPORT.format(pre=self.pre, body=self.body)
        cpu_before = _children_cpu()
        began = time.perf_counter()
        result = subprocess.run([sys.executable, "-c", code], env=self.env, cwd=cwd, capture_output=True, text=True)
        self.samples["wall"].append(time.perf_counter() - began)
        self.samples["cpu"].append(_children_cpu() - cpu_before)
        if result.returncode != 0:
            raise RuntimeError(f"{self.name} failed:\n{result.stderr}")
        elapsed, cpu, ray_seen, torch_seen = result.stdout.split()[-4:]
        self.samples["import"].append(float(elapsed))
        self.samples["import_cpu"].append(float(cpu))
        self.imported_ray, self.imported_torch = ray_seen == "True", torch_seen == "True"

    def clear(self) -> None:
        for values in self.samples.values():
            values.clear()

    def ms(self, kind: str) -> float:
        return statistics.median(self.samples[kind]) * 1000


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def clean_env(trace_dir: str, configured: bool) -> dict[str, str]:
    # Bytecode is cached as on a user's machine: without it every run pays compiling nrlprof.
    hidden = ("NRL_", "NRLPROF_", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if not k.startswith(hidden)}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    if configured:
        env.update(CONFIGURED_ENV, NRL_TORCH_PROFILE_DIR=trace_dir)
    return env


def make_cases(trace_dir: str) -> dict[str, Case]:
    bare, configured = clean_env(trace_dir, False), clean_env(trace_dir, True)
    return {
        "bare": Case("python -c pass", "", "pass", bare),
        "unconfigured": Case("import nrlprof (nothing set)", "", "import nrlprof", bare),
        "ray": Case("import ray (nothing set)", "", "import ray", bare),
        "configured": Case("import ray (variables set: nrlprof activates)", "", "import ray", configured),
    }


def measure(cases: dict[str, Case], runs: int, ray_runs: int, cwd: str) -> None:
    """Interleaved runs; the two cases that import ray (about a second each) run `ray_runs` times."""
    for case in cases.values():  # warm the file cache
        case.run_once(cwd)
        case.clear()
    for index in range(max(runs, ray_runs)):
        for key, case in cases.items():
            if index < (ray_runs if key in RAY_CASES else runs):
                case.run_once(cwd)


def importtime(env: dict[str, str], code: str, cwd: str) -> list[tuple[int, int, str]]:
    """(self us, cumulative us, module) for every module nrlprof's import (or its start-up hook) loads."""
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
    """The rows of the `nrlprof` import and everything under it (printed before it); with variables set, the
    start-up hook (`nrlprof_startup`) imports it while `site` runs, before the program."""
    end = max(i for i, row in enumerate(rows) if row[3] in ("nrlprof", "nrlprof_startup"))
    depth = rows[end][2]
    start = end
    while start > 0 and rows[start - 1][2] > depth:
        start -= 1
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
    parser.add_argument("--ray-runs", type=int, default=15, help="runs of the two cases importing ray (default 15)")
    parser.add_argument("--top", type=int, default=8, help="modules listed from -X importtime (default 8)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nrlprof-bench-import-") as work:
        trace_dir = str(Path(work) / "traces")
        cases = make_cases(trace_dir)
        began = time.perf_counter()
        measure(cases, args.runs, args.ray_runs, work)
        seconds = time.perf_counter() - began
        print_importtime("Nothing set", importtime(cases["unconfigured"].env, "import nrlprof", work), args.top)
        hook = importtime(cases["configured"].env, "pass", work)
        print_importtime("Variables set (the start-up hook)", hook, args.top)
    print(
        f"\nMedians of {args.runs} interleaved runs ({args.ray_runs} for those importing ray; {seconds:.0f} s), "
        f"Python {sys.version.split()[0]}, "
        f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    print_table(
        ("case", "process wall", "process CPU", "import wall", "import CPU"),
        [
            (case.name, *(f"{case.ms(kind):.1f} ms" for kind in ("wall", "cpu", "import", "import_cpu")))
            for case in cases.values()
        ],
    )
    print()
    print_table(("figure", "value", "target"), figures(cases))
    return 0


def figures(cases: dict[str, Case]) -> list[tuple[str, str, str]]:
    bare, unconfigured, ray, configured = (cases[k] for k in ("bare", "unconfigured", "ray", "configured"))
    extra_cpu = unconfigured.ms("cpu") - bare.ms("cpu")
    verdict = "met" if extra_cpu < TARGET_MS and not unconfigured.imported_ray else "MISSED"
    return [
        ("nothing set: extra CPU time vs python -c pass", f"{extra_cpu:+.1f} ms", f"< {TARGET_MS:.0f} ms: {verdict}"),
        ("nothing set: extra wall time vs python -c pass", f"{unconfigured.ms('wall') - bare.ms('wall'):+.1f} ms", ""),
        ("nothing set: import nrlprof alone, CPU / wall", _pair(unconfigured), ""),
        ("nothing set: wall time ratio to python -c pass", f"{unconfigured.ms('wall') / bare.ms('wall'):.3f}x", ""),
        ("nothing set: ray / torch imported", f"{unconfigured.imported_ray} / {unconfigured.imported_torch}", "no/no"),
        ("variables set: extra CPU time vs import ray", f"{configured.ms('cpu') - ray.ms('cpu'):+.1f} ms", ""),
        ("variables set: extra wall time vs import ray", f"{configured.ms('wall') - ray.ms('wall'):+.1f} ms", ""),
        ("variables set: CPU time ratio to import ray", f"{configured.ms('cpu') / ray.ms('cpu'):.3f}x", ""),
        ("variables set: torch imported", str(configured.imported_torch), "no"),
    ]


def _pair(case: Case) -> str:
    return f"{case.ms('import_cpu'):.1f} / {case.ms('import'):.1f} ms"


def print_table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row)))


if __name__ == "__main__":
    sys.exit(main())
