"""The name a child process of a worker is reported under: `<worker>.<child>`.

`<child>` is the process's `multiprocessing` name (`EngineCore_0`), else its process title where the program set
one (`setproctitle`, `prctl`), else its executable, in snake case and fit for a file name.
"""

from __future__ import annotations

import os
import sys

from nrlprof.layout import file_safe
from nrlprof.process.import_hooks import imported
from nrlprof.workers.identity import snake_case

# The kernel keeps the first 15 bytes of a process's name (`/proc/<pid>/comm`).
COMM_LENGTH = 15


def multiprocessing_name() -> str | None:
    """`Process.name` in a process `multiprocessing` started (None in any other)."""
    process = imported("multiprocessing.process")
    if process is None or process.parent_process() is None:
        return None
    return process.current_process().name


def process_title() -> str | None:
    """The title the program gave itself: its command line rewritten, or a name set with `prctl`."""
    try:
        with open("/proc/self/cmdline", "rb") as handle:
            words = [w.decode(errors="replace") for w in handle.read().split(b"\0") if w]
    except OSError:
        words = []
    if words and words != list(getattr(sys, "orig_argv", words)):
        return " ".join(words).split()[0]
    try:
        with open("/proc/self/comm", encoding="utf-8", errors="replace") as handle:
            comm = handle.read().strip()
    except OSError:
        return None
    launched = os.path.basename(sys.orig_argv[0]) if getattr(sys, "orig_argv", None) else ""
    return comm if comm and comm != launched[:COMM_LENGTH] else None


def executable_name() -> str:
    return os.path.basename(sys.executable or (sys.orig_argv[0] if getattr(sys, "orig_argv", None) else "")) or "python"


def child_part() -> str:
    """`engine_core_0`, `vllm_engine_core`, `python3.11`: the part after `<worker>.`."""
    raw = multiprocessing_name() or process_title() or executable_name()
    return file_safe(snake_case(raw))
