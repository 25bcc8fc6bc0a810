"""How the tools start reader processes: fork where it is safe, else a forkserver (spawn where there is none)."""

from __future__ import annotations

import multiprocessing
import os
import sys


def start_context(preload: str) -> multiprocessing.context.BaseContext:
    """fork where it is safe (Linux, this process has one thread): the readers share what is imported.

    Else a forkserver that imports `preload` (a module name) once for all readers; spawn where there is none.
    """
    methods = multiprocessing.get_all_start_methods()
    if sys.platform == "linux" and "fork" in methods and single_threaded():
        return multiprocessing.get_context("fork")
    if "forkserver" not in methods:
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([preload])
    return context


def single_threaded() -> bool:
    """Whether this process has one thread, counting those Python did not start (Linux's /proc)."""
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1
