"""Runs in a matched worker process at start, through Ray's worker setup hook."""

from __future__ import annotations

import os

from nrlprof.launch.runtime_env import USER_SETUP_HOOK_VARIABLE


def setup() -> None:
    """Activate this worker's Session, then run the setup hook the job or the user had before ours."""
    from nrlprof.runtime.activation import activate_worker

    try:
        activate_worker()
    except Exception as err:  # profiling must never be the reason a worker fails to start
        from nrlprof.log import logger

        logger.error("nrlprof could not activate in this worker; it runs unprofiled: %s", err)
    earlier_hook = os.environ.get(USER_SETUP_HOOK_VARIABLE)
    if earlier_hook:
        from nrlprof import rayapi

        error = rayapi.run_setup_hook(earlier_hook)
        if error is not None:
            raise RuntimeError(error)
