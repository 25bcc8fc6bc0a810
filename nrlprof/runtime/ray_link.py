"""Whether this process is connected to Ray now. nrlprof calls Ray only then: Ray's API starts a Ray instance of
its own on first use, so a call made after the job's `ray.shutdown()` would start a second one."""

from __future__ import annotations

from nrlprof.process.import_hooks import imported_already


def ray_connected() -> bool:
    ray = imported_already("ray")
    return ray is not None and ray.is_initialized()
