"""Applications the nsys stand-in launches, one per behaviour of nsys the tests check: `python under_nsys.py
<application> [arguments]`. Each talks to the stand-in as a CUDA program does, through `libcudart.so` (the
stand-in's, on the library path it gives its child) and the real `nvtx` package, and prints what the test reads
back as `EMIT {json}` lines."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import nvtx

HERE = os.path.abspath(__file__)
runtime = ctypes.CDLL("libcudart.so")


def emit(**fields: object) -> None:
    print("EMIT " + json.dumps(fields), flush=True)


def cycles() -> None:
    """Three capture ranges, a mark in each."""
    emit(pid=os.getpid())
    for k in (1, 2, 3):
        emit(start=runtime.cudaProfilerStart())
        nvtx.mark(message=f"inside {k}", domain="nrlprof")
        emit(stop=runtime.cudaProfilerStop())


def cycles_then_wait() -> None:
    """The three ranges, then 30 s more of the application before it says it finished."""
    cycles()
    time.sleep(30)
    emit(finished=True)


def pid() -> None:
    emit(pid=os.getpid())


def ran() -> None:
    emit(ran=True)


def nothing() -> None:
    pass


def one_range() -> None:
    """One range, with the pid of the process that opens it and of its parent."""
    emit(pid=os.getpid(), parent=os.getppid())
    runtime.cudaProfilerStart()
    runtime.cudaProfilerStop()


def timed_stop() -> None:
    """How long a stop took, and whether its report was there when it returned (the report named `slow_%p`)."""
    report = f"slow_{os.getpid()}.nsys-rep"
    runtime.cudaProfilerStart()
    began = time.monotonic()
    code = runtime.cudaProfilerStop()
    emit(code=code, blocked_s=time.monotonic() - began, exists=os.path.exists(report))


def nvtx_ranges() -> None:
    """NVTX ranges of both kinds before, inside, across the end of and after one capture range, one on another
    thread; emits the other thread's id, then the main thread's."""
    outer = nvtx.start_range(message="before the capture", domain="nrlprof")
    nvtx.push_range("pushed before", domain="nrlprof")
    runtime.cudaProfilerStart()
    step = nvtx.start_range(message="step 3", domain="nrlprof")
    nvtx.push_range("policy.train [step 3]", domain="nrlprof")
    nvtx.pop_range(domain="nrlprof")

    def other_thread() -> None:
        nvtx.push_range("on another thread", domain="other")
        nvtx.pop_range(domain="other")
        emit(tid=threading.get_native_id())

    worker = threading.Thread(target=other_thread)
    worker.start()
    worker.join()
    nvtx.end_range(step)
    left_open = nvtx.start_range(message="open at stop", domain="nrlprof")
    emit(tid=threading.get_native_id())
    runtime.cudaProfilerStop()
    nvtx.end_range(left_open)
    nvtx.pop_range(domain="nrlprof")
    nvtx.end_range(outer)
    after = nvtx.start_range(message="after the capture", domain="nrlprof")
    nvtx.end_range(after)


def killed_in_second_range() -> None:
    """One range closed, then killed (SIGKILL) inside a second."""
    runtime.cudaProfilerStart()
    runtime.cudaProfilerStop()
    runtime.cudaProfilerStart()
    os.kill(os.getpid(), signal.SIGKILL)


def exit_in_range() -> None:
    """Exits with status 3 inside a range."""
    runtime.cudaProfilerStart()
    sys.exit(3)


def mark_and_stop() -> None:
    """A mark, and a stop with no range opened."""
    nvtx.mark(message="m", domain="d")
    emit(code=runtime.cudaProfilerStop())


def waits_for_sigterm() -> None:
    """Inside a range, `ready` written in its directory, it waits for a SIGTERM, says it got it and exits."""
    signal.signal(signal.SIGTERM, lambda *_: (emit(got="SIGTERM"), sys.exit(0)))
    runtime.cudaProfilerStart()
    open("ready", "w").close()
    time.sleep(60)


def unpaired_calls() -> None:
    """A stop with none open, a start while one is open, a second stop after the range closed."""
    codes = [runtime.cudaProfilerStop(), runtime.cudaProfilerStart(), runtime.cudaProfilerStart()]
    time.sleep(0.2)
    codes += [runtime.cudaProfilerStop(), runtime.cudaProfilerStop()]
    emit(codes=codes)


def standin_socket() -> None:
    """The path of the stand-in's socket, as the stand-in gives it to its child."""
    emit(socket=os.environ["NRLPROF_STANDIN_SOCKET"])


def child(*words: str) -> None:
    """A child of the launched application: a range of its own around NVTX work; prints its pid and how long its
    stop took. `die`: then killed inside a second range."""
    runtime.cudaProfilerStart()
    with nvtx.annotate("child work", domain="engine"):
        time.sleep(0.1)
    began = time.monotonic()
    runtime.cudaProfilerStop()
    print(os.getpid(), time.monotonic() - began, flush=True)
    if words == ("die",):
        runtime.cudaProfilerStart()
        os.kill(os.getpid(), signal.SIGKILL)


def run_child(*words: str, check: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, HERE, "child", *words], capture_output=True, text=True, check=check)


def parent_of_a_child() -> None:
    """A range around NVTX work that runs a child (`child`); emits both pids, the child's stop time and the
    directory's files before its own stop."""
    runtime.cudaProfilerStart()
    with nvtx.annotate("parent work", domain="engine"):
        done = run_child(check=True)
    child_pid, child_stop_s = done.stdout.split()
    emit(pid=os.getpid(), child=int(child_pid), child_stop_s=float(child_stop_s), before=sorted(os.listdir(".")))
    runtime.cudaProfilerStop()


def parent_of_a_dying_child() -> None:
    """A range around a child killed with its second range open (`child die`); emits both pids and whether the
    report (named `dead_%p`) was there when the parent's stop returned."""
    runtime.cudaProfilerStart()
    done = run_child("die")
    runtime.cudaProfilerStop()
    emit(pid=os.getpid(), child=int(done.stdout.split()[0]), report=os.path.exists(f"dead_{os.getpid()}.nsys-rep"))


def session_windows(nsys: str) -> None:
    """Launched by `nsys launch --session-new=s1`: ranges before any collection, two collections of one capture
    range each started with `nsys start`, a stop with none active, a collection with no range and a second start
    while it is active; emits each `nsys` command's exit status and error, and the reports there after each."""

    def nsys_command(*words: str) -> tuple[int, str]:
        done = subprocess.run([sys.executable, nsys, *words], capture_output=True, text=True)
        return done.returncode, done.stderr.strip()

    def reports() -> list[str]:
        return sorted(p for p in os.listdir() if p.endswith(".nsys-rep"))

    emit(pid=os.getpid(), before_start=[runtime.cudaProfilerStart(), runtime.cudaProfilerStop()])
    for k in (1, 2):
        range_options = ("-c", "cudaProfilerApi", "--capture-range-end=stop")
        emit(start=nsys_command("start", "--session=s1", *range_options, "-o", f"w_{k}"))
        runtime.cudaProfilerStart()
        nvtx.mark(message=f"window {k}", domain="nrlprof")
        runtime.cudaProfilerStop()
        emit(reports=reports())
    emit(idle_stop=nsys_command("stop", "--session=s1"))
    emit(
        now=nsys_command("start", "--session=s1", "-o", "now"),
        twice=nsys_command("start", "--session=s1", "-o", "again"),
    )
    nvtx.mark(message="collected now", domain="nrlprof")
    emit(stop=nsys_command("stop", "--session=s1"), reports=reports())


APPLICATIONS: dict[str, Callable[..., None]] = {
    application.__name__: application
    for application in (
        cycles, cycles_then_wait, pid, ran, nothing, one_range, timed_stop, nvtx_ranges, killed_in_second_range,
        exit_in_range, mark_and_stop, waits_for_sigterm, unpaired_calls, standin_socket, child, parent_of_a_child,
        parent_of_a_dying_child, session_windows,
    )
}  # fmt: skip

if __name__ == "__main__":
    APPLICATIONS[sys.argv[1]](*sys.argv[2:])
