"""Mutate nrlprof's core modules one mutant at a time in a copy of the tree, run the tests that exercise each
module, and print the kill rate per module.

    scripts/mutation                       every module, default sampling
    scripts/mutation --module gate --every 5 --keep-going
"""

from __future__ import annotations

import argparse
import math
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from mutation.mutants import Mutant, mutants

REPO = Path(__file__).resolve().parents[2]
CONFIG_TESTS = ("test_env_config.py", "test_config_variables.py", "test_yaml_config.py", "test_config_hardening.py")


@dataclass(frozen=True)
class Target:
    """One module, the test files that exercise it (fast ones first) and the largest sample to run."""

    name: str
    path: str
    tests: tuple[str, ...]
    budget: int
    select: str = ""


# per test process (and what it starts): far above what the tests need, far below the machine
TEST_MEMORY_LIMIT = 6 << 30
# more checks of the config modules; test_tools_plan.py runs `nrlprof plan` (its one test on a cluster is left out)
MORE_CONFIG_TESTS = ("test_config_nsys_options.py", "test_identity_matching.py", "test_tools_plan.py")
SKIP_CLUSTER = "not live_actors"
TARGETS = (
    Target("steps", "nrlprof/config/steps.py", (*CONFIG_TESTS, *MORE_CONFIG_TESTS), 30, SKIP_CLUSTER),
    Target("env", "nrlprof/config/env.py", (*CONFIG_TESTS, *MORE_CONFIG_TESTS), 30, SKIP_CLUSTER),
    Target(
        "nsys_options",
        "nrlprof/config/nsys/options.py",
        ("test_config_nsys_options.py", "test_yaml_config.py", "test_config_hardening.py", *MORE_CONFIG_TESTS),
        25,
        SKIP_CLUSTER,
    ),
    Target(
        "identity",
        "nrlprof/workers/identity.py",
        ("test_identity_matching.py", "test_runtime_env.py", "test_yaml_config.py", *MORE_CONFIG_TESTS),
        30,
        SKIP_CLUSTER,
    ),
    Target("matching", "nrlprof/workers/matching.py", ("test_identity_matching.py", "test_runtime_env.py"), 30),
    Target("layout", "nrlprof/layout.py", ("test_layout.py", "test_tools_bad_inputs.py"), 30),
    Target("manifest", "nrlprof/manifest.py", ("test_manifest.py",), 30),
    Target(
        "traces",
        "nrlprof/tools/read/traces.py",
        (
            "test_trace_reading_edges.py",
            "test_tools_bad_inputs.py",
            "test_tools_merge.py",
        ),
        40,
    ),
    Target(
        "inputs",
        "nrlprof/tools/read/inputs.py",
        (
            "test_tools_inputs.py",
            "test_trace_reading_edges.py",
            "test_manifest.py",
            "test_tools_bad_inputs.py",
        ),
        30,
    ),
    Target("trace_pool", "nrlprof/tools/figures/trace_pool.py", ("test_trace_pool.py",), 30),
    Target(
        "gpu_time",
        "nrlprof/tools/figures/gpu_time.py",
        ("test_gpu_attribution.py", "test_tools_gpu.py", "test_summary_event_decoding.py", "test_trace_pool.py"),
        30,
    ),
    Target("gate", "nrlprof/runtime/windows/gate.py", ("test_gate.py",), 12),
    # The per-step NVTX ranges, seen through the nsys stand-in's NVTX injection library.
    Target("step_ranges", "nrlprof/ranges/step_ranges.py", ("test_step_ranges.py",), 30),
)


def copy_tree(destination: Path) -> None:
    """The working tree as git sees it (tracked and untracked, not ignored), never the original in place."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=REPO, capture_output=True, check=True
    ).stdout.split(b"\0")
    for raw in filter(None, listed):
        source = REPO / raw.decode()
        if source.is_file():
            target = destination / raw.decode()
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def run_tests(tree: Path, target: Target, deselect: list[str], timeout_s: float) -> tuple[int, str]:
    files = [f"tests/{name}" for name in dict.fromkeys(target.tests) if (tree / "tests" / name).exists()]
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-rf", *files]
    command += [f"--deselect={node}" for node in deselect] + (["-k", target.select] if target.select else [])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tree), str(tree / "tests")])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    # its own process group: a timeout, or the run stopped, ends what the tests started too
    tests = subprocess.Popen(
        command, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True, preexec_fn=_limit_memory,
    )  # fmt: skip
    try:
        output, _ = tests.communicate(timeout=timeout_s)
        return tests.returncode, output
    except subprocess.TimeoutExpired:
        return 124, ""
    finally:
        if tests.poll() is None:
            os.killpg(tests.pid, signal.SIGKILL)
            tests.communicate()


def _limit_memory() -> None:
    """A mutant that lifts a memory bound (the trace reader's depth check) fails with MemoryError in the
    tests instead of taking the shared machine's memory."""
    resource.setrlimit(resource.RLIMIT_DATA, (TEST_MEMORY_LIMIT, TEST_MEMORY_LIMIT))


def sample(all_mutants: list[Mutant], budget: int, every: int | None) -> tuple[list[Mutant], int]:
    stride = every or max(1, math.ceil(len(all_mutants) / budget))
    return all_mutants[::stride], stride


def mutate_module(tree: Path, target: Target, every: int | None, verbose: bool) -> tuple[int, int, list[Mutant]]:
    path = tree / target.path
    original = path.read_text()
    baseline_started = time.monotonic()
    code, output = run_tests(tree, target, [], timeout_s=900)
    baseline_s = time.monotonic() - baseline_started
    deselect = re.findall(r"^FAILED (\S+)", output, re.MULTILINE)
    if code not in (0, 1) or (code == 1 and not deselect):
        print(f"  {target.name}: the unmutated tests do not run (exit {code}); module skipped", flush=True)
        return 0, 0, []
    if deselect:
        code, _ = run_tests(tree, target, deselect, timeout_s=900)
        print(f"  {target.name}: {len(deselect)} test(s) already failing without a mutant, left out: {deselect}")
        if code != 0:
            print(f"  {target.name}: still failing without a mutant; module skipped", flush=True)
            return 0, 0, []
    chosen, stride = sample(list(mutants(original)), target.budget, every)
    total = len(list(mutants(original)))
    print(f"  {target.name}: {total} mutants, every {stride}th run: {len(chosen)} (baseline {baseline_s:.0f} s)")
    survivors: list[Mutant] = []
    try:
        for mutant in chosen:
            path.write_text(mutant.source)
            code, _ = run_tests(tree, target, deselect, timeout_s=max(60.0, 5 * baseline_s))
            if code == 0:
                survivors.append(mutant)
            if verbose or code == 0:
                state = "survived" if code == 0 else ("timeout" if code == 124 else "killed")
                print(f"    {target.path}:{mutant.line} {mutant.kind}: {state}", flush=True)
    finally:
        path.write_text(original)
    return len(chosen), len(chosen) - len(survivors), survivors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/mutation", description=__doc__.splitlines()[0])
    parser.add_argument("--module", action="append", choices=[t.name for t in TARGETS], help="only these modules")
    parser.add_argument("--every", type=int, help="run every k-th mutant (default: each module's budget)")
    parser.add_argument("--verbose", action="store_true", help="print killed mutants too")
    args = parser.parse_args(argv)
    selected = [t for t in TARGETS if not args.module or t.name in args.module]
    # a terminated run still removes its copy of the tree
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    rows: list[tuple[str, int, int]] = []
    with tempfile.TemporaryDirectory(prefix="nrlprof-mutation-") as scratch:
        tree = Path(scratch)
        copy_tree(tree)
        for target in selected:
            run, killed, _ = mutate_module(tree, target, args.every, args.verbose)
            rows.append((target.name, run, killed))
    print("\n| module | mutants run | killed | rate |\n| --- | --- | --- | --- |")
    for name, run, killed in rows:
        rate = f"{100 * killed / run:.0f}%" if run else "-"
        print(f"| {name} | {run} | {killed} | {rate} |")
    run_all, killed_all = sum(r[1] for r in rows), sum(r[2] for r in rows)
    if run_all:
        print(f"| all | {run_all} | {killed_all} | {100 * killed_all / run_all:.0f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
