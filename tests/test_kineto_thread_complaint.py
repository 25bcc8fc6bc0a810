"""Kineto's "External init callback must run in same thread as registerClient" (printed to descriptor 2 when a
process's first torch profiler starts off the thread that loaded torch, as nrlprof's window thread does in an
engine's processes) stays out of the log; what other threads write meanwhile does not."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from nrlprof.backends.kineto_first_start import THREAD_COMPLAINT

PROGRAM = Path(__file__).parent / "programs" / "kineto_first_start.py"


def test_the_first_start_off_the_main_thread_prints_no_kineto_complaint():
    runs = {
        how: subprocess.Popen([sys.executable, str(PROGRAM), how], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for how in ("plain", "nrlprof")
    }
    results = {how: run.communicate(timeout=300) for how, run in runs.items()}
    plain_out, plain_err = results["plain"]
    assert THREAD_COMPLAINT in plain_err, "torch's own start complains: what nrlprof keeps out"
    out, err = results["nrlprof"]
    assert THREAD_COMPLAINT not in err
    assert b"written by the engine meanwhile\n" in err
    assert out.split() == plain_out.split() == [b"1"], "the trace is recorded all the same"
