"""The job ends Ray, or one of its workers: nrlprof closes the windows concerned first.

Ray kills a worker's process when the job calls `ray.kill` on it or shuts Ray down (a driver that joined a
cluster by address only disconnects, but its actors end with it): files written only when a window closes would
be lost. So `ray.shutdown` first closes every open window (the session finishes, as it would at exit), and
`ray.kill` first closes the windows of the tracked actor it ends. The tracked
actors of a Ray instance that is shut down are forgotten: nothing calls them, so nothing starts Ray again.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from nrlprof import rayapi
from nrlprof.log import logger
from nrlprof.process import patches, state
from nrlprof.process.kind import DRIVER
from nrlprof.runtime.controller import Controller
from nrlprof.runtime.windows.profiler import SETTLE, STOP, Action

if TYPE_CHECKING:
    from nrlprof.runtime.profiled import ProfiledProcess
    from nrlprof.workers.tracker import TrackedActor

SHUTDOWN_PATCH = "ray.shutdown (open windows closed first)"
KILL_PATCH = "ray.kill (the actor's windows closed first)"


def install(session: ProfiledProcess) -> None:
    import ray

    patches.install(SHUTDOWN_PATCH, ray, "shutdown", lambda original: _first(original, session, _before_shutdown))
    patches.install(KILL_PATCH, ray, "kill", lambda original: _first(original, session, _before_kill))


def _first(original: Callable, session: ProfiledProcess, before: Callable[..., None]) -> Callable:
    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if state.session is session and rayapi.connected():
            try:
                before(session, *args, **kwargs)
            except Exception as err:  # the job's own call goes on whatever happens here
                logger.error("closing windows before %s failed: %s", original.__name__, err)
        return original(*args, **kwargs)

    return wrapper


def _before_shutdown(session: ProfiledProcess, *args: Any, **kwargs: Any) -> None:
    controller = session if isinstance(session, Controller) else None
    gate = controller.built_gate() if controller is not None else None
    if gate is not None and (gate.open or gate.prepared):
        logger.info("ray.shutdown() with a window open: nrlprof closes it first, in every worker")
    if controller is not None and controller.kind == DRIVER:  # those it created that became controllers, if any
        from nrlprof.runtime.job_env import finish_controllers

        finish_controllers(controller)
    if gate is not None:
        session.finish()
    else:  # a worker, or a process it started, that drives actors of its own: their windows close
        for tracked in session.tracker.actors():
            _release(session, tracked)
    session.tracker.clear()
    if controller is not None:
        controller.forget_created()


def _before_kill(session: ProfiledProcess, actor: Any = None, *args: Any, **kwargs: Any) -> None:
    if actor is None:
        return
    gate = session.built_gate() if isinstance(session, Controller) else None
    if gate is not None:
        gate.release(actor)
    else:
        tracked = session.tracker.find(actor)
        if tracked is not None:
            _release(session, tracked)


def _release(session: ProfiledProcess, tracked: TrackedActor) -> None:
    """In a worker or its child: an actor it created follows its windows, those open in this process."""
    backends = session.process.backends if session.has_process else {}
    kinds = [kind for kind, backend in backends.items() if backend.window is not None and kind in tracked.kinds]
    # Its files of windows stopped before are finished first too (nrlprof.process.finishing).
    settles = [Action(kind, SETTLE) for kind, backend in backends.items() if kind in tracked.kinds
               and backend.finishes_beside]  # fmt: skip
    channel = session.channel
    channel.release(channel.transport.peer_of(tracked), (*(Action(kind, STOP) for kind in kinds), *settles))
