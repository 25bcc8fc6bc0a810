"""Every remote method call of a matched worker as a range `<worker>.<method>`, with no decorator.

Ray builds one executor per actor method when the actor class loads in the worker; the
patch wraps each executor.  Outside a window the wrapper costs one global read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nrlprof.process import patches, state

PATCH_NAME = "ray.FunctionActorManager._make_actor_method_executor"


def _traced(executor: Callable, label: str, method_name: str) -> Callable:
    from nrlprof.ranges.annotate import _Ranges

    def traced(__ray_actor: Any, *args: Any, **kwargs: Any) -> Any:
        session = state.session
        if session is None or not session.windows.any_open:
            return executor(__ray_actor, *args, **kwargs)
        ranges = _Ranges(label, None, True, method_name)
        try:
            result = executor(__ray_actor, *args, **kwargs)
        except BaseException:
            ranges.close()
            raise
        if hasattr(result, "__await__"):
            return _closing_after(result, ranges)
        ranges.close()
        return result

    traced.name = executor.name
    traced.method = executor.method
    return traced


async def _closing_after(awaitable: Any, ranges: Any) -> Any:
    try:
        return await awaitable
    finally:
        ranges.close()


def install(worker_name: str) -> None:
    from ray._private.function_manager import FunctionActorManager

    def wrap(original: Callable) -> Callable:
        def make_executor(self: Any, method_name: str, method: Callable) -> Callable:
            executor = original(self, method_name, method)
            if method_name.startswith("__"):
                return executor
            return _traced(executor, f"{worker_name}.{method_name}", method_name)

        return make_executor

    patches.install(PATCH_NAME, FunctionActorManager, "_make_actor_method_executor", wrap)
