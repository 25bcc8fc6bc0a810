"""`import nrlprof` with a step range that starts at step 0, set in the program's own environment after start-up
(so the start-up hook has not read it): prints `rejected: <error type>` where the import refuses it. Run with
`python -O step_zero_rejected.py` to check the validation is no `assert`."""

from __future__ import annotations

import os

os.environ.update(NRL_NSYS_WORKER_PATTERNS="*", NRL_NSYS_PROFILE_STEP_RANGE="0:10")
try:
    import nrlprof  # noqa: F401
except ValueError as err:
    print("rejected:", type(err).__name__)
