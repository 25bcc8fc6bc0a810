"""A program that hands the finisher a job (a second's sleep, then writing `finished` to the file it is given) and
exits at once; the file says whether the interpreter's exit waited for the job (`python exit_with_a_job_left.py
<file>`)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from nrlprof.process.finishing import FINISHER


def slow_write() -> None:
    time.sleep(1.0)
    Path(sys.argv[1]).write_text("finished")


FINISHER.run(slow_write)
print("exiting", flush=True)
