"""Every remote method call of a matched worker, and in an armed job of a worker a window asked for selects, as a
range `<worker>.<method>`, with no decorator.

Ray builds one executor per actor method when the actor class loads in the worker; the
patch wraps each executor.  Outside a window the wrapper costs two global reads.  The files of a window stopped
before (nrlprof.process.finishing) are finished beside the next call, which returns once they are final: the
worker's files of a window are whole when its next call is done, whatever ends the job after.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from nrlprof.process import patches, state
from nrlprof.process.finishing import FINISHER

PATCH_NAME = "ray.FunctionActorManager._make_actor_method_executor"


def _traced(executor: Callable, label: str | None, method_name: str) -> Callable:
    """`label` None: a worker of an armed job, named only once a window asked for selects it."""
    from nrlprof.ranges.annotate import _Ranges

    def traced(__ray_actor: Any, *args: Any, **kwargs: Any) -> Any:
        if FINISHER.pending:
            FINISHER.begin()
        session = state.session
        name = None
        if session is not None and session.windows.any_open:
            name = label if label is not None else _asked_label(method_name)
        if name is None:
            result = executor(__ray_actor, *args, **kwargs)
            return _settled(result) if FINISHER.pending else result
        ranges = _Ranges(name, None, True, method_name)
        try:
            result = executor(__ray_actor, *args, **kwargs)
        except BaseException:
            ranges.close()
            raise
        if hasattr(result, "__await__"):
            return _closing_after(result, ranges)
        ranges.close()
        return _settled(result) if FINISHER.pending else result

    traced.name = executor.name
    traced.method = executor.method
    return traced


def _asked_label(method_name: str) -> str | None:
    identity = state.session.identity
    return None if identity is None else f"{identity.name}.{method_name}"


async def _closing_after(awaitable: Any, ranges: Any) -> Any:
    try:
        return await awaitable
    finally:
        ranges.close()
        if FINISHER.pending:
            await _settled_on_a_thread()


def _settled(result: Any) -> Any:
    """The call's result once the files being finished are final (an async call's: awaited on a thread)."""
    if hasattr(result, "__await__"):
        return _settled_after(result)
    FINISHER.settle()
    return result


async def _settled_after(awaitable: Any) -> Any:
    try:
        return await awaitable
    finally:
        await _settled_on_a_thread()


async def _settled_on_a_thread() -> None:
    """Wait for the files being finished without holding up the event loop."""
    await asyncio.get_running_loop().run_in_executor(None, FINISHER.settle)


def install(worker_name: str | None) -> None:
    """Ranges named `<worker_name>.<method>`; with None, named after the worker a window asked for selects (no
    range outside such a window)."""
    from nrlprof import rayapi

    def wrap(original: Callable) -> Callable:
        def make_executor(self: Any, method_name: str, method: Callable) -> Callable:
            executor = original(self, method_name, method)
            if method_name.startswith("__"):
                return executor
            label = None if worker_name is None else f"{worker_name}.{method_name}"
            return _traced(executor, label, method_name)

        return make_executor

    patches.install(PATCH_NAME, *rayapi.method_executor_factory(), wrap)
