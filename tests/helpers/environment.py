"""The environment a test gives a process it starts, and the Ray settings every cluster of the run starts with."""

from __future__ import annotations

import os

# Ray starts its workers at niceness 15. On 2 cores, any process of the run at 0 (a test's driver, pytest, a busy
# neighbour) leaves them ~3% of a core, and a test then waits on workers it starves: an OpenRLHF job beside two busy
# processes had not created its first actor after 6 minutes at 15, and finished in 2:20 at 0. A raylet also starts as
# many idle workers as it has CPUs for its first driver, while the tests' jobs start their own (runtime envs of their
# own): on 2 cores that is only lost time. Every cluster of the run, also one a test's own driver or `ray start`
# starts, takes these.
RUN_RAY_SETTINGS = {"RAY_worker_niceness": "0", "RAY_prestart_worker_first_driver": "0"}


def run_ray_settings() -> dict[str, str]:
    """RUN_RAY_SETTINGS, where the person running the suite has not set them otherwise."""
    return {name: os.environ.get(name, value) for name, value in RUN_RAY_SETTINGS.items()}


def environment_without(*prefixes: str) -> dict[str, str]:
    """This process's environment less the variables whose names start with one of `prefixes`, with the run's Ray
    settings kept (a test that leaves out the suite's `RAY_` variables still starts clusters as the run does)."""
    kept = {name: value for name, value in os.environ.items() if not name.startswith(prefixes)}
    return kept | run_ray_settings()
