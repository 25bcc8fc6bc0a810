"""A process's first torch profiler started off the thread that loaded torch, as nrlprof's window thread starts it in
an engine's processes: `python kineto_first_start.py nrlprof` with nrlprof keeping Kineto's complaint out, `plain`
without; prints the aten::mm events the trace holds."""

from __future__ import annotations

import contextlib
import os
import sys
import threading

import torch

from nrlprof.backends.kineto_first_start import without_thread_complaint

quiet = without_thread_complaint if sys.argv[1] == "nrlprof" else contextlib.nullcontext


def window():
    profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
    with quiet():
        os.write(2, b"written by the engine meanwhile\n")
        profiler.start()
    torch.mm(torch.ones(8, 8), torch.ones(8, 8))
    profiler.stop()
    print(sum(e.name == "aten::mm" for e in profiler.events()))


thread = threading.Thread(target=window)
thread.start()
thread.join()
