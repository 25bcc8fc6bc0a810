"""Kineto's "External init callback must run in same thread as registerClient" (printed to descriptor 2 when a
process's first torch profiler starts off the thread that loaded torch, as nrlprof's window thread does in an
engine's processes) stays out of the log; what other threads write meanwhile does not."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from nrlprof.backends.kineto_first_start import THREAD_COMPLAINT

PROGRAM = textwrap.dedent(
    """
    import contextlib, os, sys, threading
    import torch
    from nrlprof.backends.kineto_first_start import without_thread_complaint

    quiet = without_thread_complaint if sys.argv[1] == "nrlprof" else contextlib.nullcontext

    def window():
        profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
        with quiet():
            os.write(2, b"written by the engine meanwhile\\n")
            profiler.start()
        torch.mm(torch.ones(8, 8), torch.ones(8, 8))
        profiler.stop()
        print(sum(e.name == "aten::mm" for e in profiler.events()))

    thread = threading.Thread(target=window)
    thread.start()
    thread.join()
    """
)


def test_the_first_start_off_the_main_thread_prints_no_kineto_complaint():
    runs = {
        how: subprocess.Popen([sys.executable, "-c", PROGRAM, how], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for how in ("plain", "nrlprof")
    }
    results = {how: run.communicate(timeout=300) for how, run in runs.items()}
    plain_out, plain_err = results["plain"]
    assert THREAD_COMPLAINT in plain_err, "torch's own start complains: what nrlprof keeps out"
    out, err = results["nrlprof"]
    assert THREAD_COMPLAINT not in err
    assert b"written by the engine meanwhile\n" in err
    assert out.split() == plain_out.split() == [b"1"], "the trace is recorded all the same"
