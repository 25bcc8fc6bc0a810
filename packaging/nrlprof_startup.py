"""nrlprof at interpreter start-up: imported by `nrlprof-startup.pth` when an NRL_* variable is set.

`import nrlprof` activates it (nrlprof.process.kind says what this process is). A bad setting ends
the process here, before the program's own code, with one line naming the variable (exit 2); any other
failure leaves the program running unprofiled, with a warning.
"""

import os
import sys


def _activate() -> None:
    try:
        import nrlprof  # noqa: F401
    except ValueError as err:
        if type(err).__name__ != "ConfigError":
            raise
        sys.stderr.write(f"nrlprof.ConfigError: {err}\n")
        sys.stderr.flush()
        os._exit(2)


try:
    _activate()
except Exception as err:  # never the reason an interpreter fails to start
    sys.stderr.write(f"[nrlprof] WARNING could not activate at start-up; this process runs unprofiled: {err!r}\n")
