"""What nrlprof's start-up hook (nrlprof-startup.pth) adds to an interpreter's start with no NRL_* variable set.

Target: at most +0.1 ms. Two figures, each against a baseline measured in the same run:
- in process: `site.addpackage` of the hook's .pth, against the same for an empty .pth (what `site` does
  at start-up for every .pth file), best of many rounds;
- whole interpreters: `python -c pass` of one fresh venv of this interpreter, with the hook in its
  site-packages, without it, and with a one-line `.pth` that only runs `import os; 0` (the least any `.pth`
  hook costs: site compiles and runs the line), started in a shuffled order each round; the differences of
  the medians. The whole-interpreter figure is the one the target is about; on a busy machine its noise
  exceeds the target, and the in-process figure is the precise one.

    python bench/bench_startup.py [--starts 300]
"""

from __future__ import annotations

import argparse
import os
import random
import site
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
import timeit
from pathlib import Path

HOOK = "nrlprof-startup.pth"
TARGET_MS = 0.1


def installed_hook() -> Path:
    path = Path(sysconfig.get_paths()["purelib"]) / HOOK
    if not path.is_file():
        raise SystemExit(f"{path} is missing: install nrlprof (scripts/setup-venv)")
    return path


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("NRL_", "NRLPROF_", "PYTHON"))}


def addpackage_us(directory: Path, name: str, rounds: int) -> float:
    """Best per-call time of `site.addpackage` for one .pth file, in microseconds."""
    timer = timeit.Timer(lambda: site.addpackage(str(directory), name, set()))
    return min(timer.repeat(repeat=rounds, number=200)) / 200 * 1e6


def start_ms(python: str) -> float:
    began = time.perf_counter()
    subprocess.run([python, "-c", "pass"], env=clean_env(), check=True)
    return (time.perf_counter() - began) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--starts", type=int, default=300, help="interpreter starts with and without the hook")
    args = parser.parse_args()
    for name in [n for n in os.environ if n.startswith("NRL_")]:
        del os.environ[name]
    hook = installed_hook()
    with tempfile.TemporaryDirectory(prefix="nrlprof-bench-startup-") as scratch:
        root = Path(scratch)
        (root / HOOK).write_text(hook.read_text())
        (root / "empty.pth").write_text("")
        hook_us = addpackage_us(root, HOOK, 30)
        empty_us = addpackage_us(root, "empty.pth", 30)
        print(f"site.addpackage of the hook: {hook_us:.1f} us; of an empty .pth: {empty_us:.1f} us; "
              f"the hook adds {hook_us - empty_us:.1f} us (target {TARGET_MS * 1000:.0f} us)")  # fmt: skip

        venv = root / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        python = str(venv / "bin" / "python")
        where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
        site_dir = Path(subprocess.check_output([python, "-c", where], text=True).strip())
        contents = {"without": None, "with the hook": hook.read_text(), "with `import os; 0`": "import os; 0\n"}
        starts: dict[str, list[float]] = {name: [] for name in contents}
        order = list(contents)
        for _ in range(args.starts):
            random.shuffle(order)
            for name in order:
                (site_dir / HOOK).unlink(missing_ok=True)
                if contents[name] is not None:
                    (site_dir / HOOK).write_text(contents[name])
                starts[name].append(start_ms(python))
        without = starts["without"]
        for figure, measure in (("median", statistics.median), ("fastest", min)):
            bare = measure(without)
            for name in ("with the hook", "with `import os; 0`"):
                hooked = measure(starts[name])
                print(f"python -c pass, {args.starts} starts each, shuffled, {figure}: {bare:.2f} ms without, "
                      f"{hooked:.2f} ms {name}: {hooked - bare:+.3f} ms ({hooked / bare:.4f}x)")  # fmt: skip
        spread = statistics.quantiles(without, n=4)
        print(f"  (quartiles of the starts without the hook: {spread[0]:.2f}-{spread[2]:.2f} ms: the in-process "
              f"figure is the precise one on a busy machine)")  # fmt: skip


if __name__ == "__main__":
    main()
