"""The actor method calls a controller submits: steps begin at them (NRL_STEP_METHOD), and they reveal profiled
workers the controller did not create (nrlprof.runtime.steps.adoption). Ray's and nrlprof's own calls
(`__ray_call__`, `__ray_ready__`) are left alone.

A Ray compiled graph (vLLM's Ray executor drives its workers with one) calls its methods without `.remote()`:
each `execute` counts as one call of the graph's methods.
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any

from nrlprof import rayapi
from nrlprof.process import patches
from nrlprof.runtime.steps.marker import StepMarker, actor_names

if TYPE_CHECKING:
    from nrlprof.runtime.controller import Controller

PATCH_NAME = "ray.actor.ActorMethod._remote"
GRAPH_PATCHES = ("execute", "execute_async")


class CallWatcher:
    def __init__(self, session: Controller) -> None:
        self.session = session
        method = session.plan.step_method
        self.marker = StepMarker(method) if method is not None else None
        # Steps are taken in order: a second thread's call waits until the step's window actions are queued.
        self.order = threading.Lock()
        self.graph_calls: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.failed = False
        self.told_repeated = False

    def called(self, calls: list[tuple[Any, str]]) -> None:
        """(actor handle, method) pairs submitted together: one call of a method, or one run of a graph."""
        calls = [(handle, method) for handle, method in calls if not method.startswith("__")]
        if not calls:
            return
        for handle, _ in calls:
            self.session.adoption.called(handle)
        if self.marker is None:
            return
        known = self.session.known_actors
        matches = any(self.marker.method_matches(actor_names(handle, known), method) for handle, method in calls)
        with self.order:
            step = self.marker.call(matches, tuple(_actor_key(handle) for handle, _ in calls))
            if step is not None:
                self.session.marker_step(step, self.marker.description)
        if self.marker.repeated and not self.told_repeated:
            self.told_repeated = True
            self._tell_repeated()

    def _tell_repeated(self) -> None:
        from nrlprof.log import logger

        text = self.marker.method.text
        logger.warning(
            "NRL_STEP_METHOD=%s: a worker got the marked method again with no other method called between; "
            "repeated calls in a row are one step, so step %d goes on. If each such call is a step, mark a "
            "method the loop calls once per step beside other calls, or call nrlprof.step(n) at the top of each step",
            text, self.marker.step,
        )  # fmt: skip

    def graph(self, compiled: Any) -> list[tuple[Any, str]]:
        """The (actor, method) of every method node of a compiled graph."""
        calls = self.graph_calls.get(compiled)
        if calls is None:
            calls = rayapi.graph_method_calls(compiled)
            self.graph_calls[compiled] = calls
        return calls

    def watch(self, calls: Any) -> None:
        """`called`, never the reason a call fails: a failure is logged once, and the call goes on."""
        try:
            self.called(calls() if callable(calls) else calls)
        except Exception as err:
            if not self.failed:
                self.failed = True
                from nrlprof.log import logger

                logger.warning("nrlprof could not follow a method call (steps or workers may be missed): %s", err)


def _actor_key(handle: Any) -> object:
    return rayapi.actor_key(handle)


def install(session: Controller) -> None:
    watcher = CallWatcher(session)

    def wrap(original_remote):
        def _remote(self, *args, **kwargs):
            watcher.watch([(self._actor, self._method_name)])
            result = original_remote(self, *args, **kwargs)
            clock = session.call_clock  # armed for slow steps: the call is timed (nrlprof.runtime.slow.calls)
            if clock is not None:
                clock.submitted(self._actor, self._method_name, result)
            return result

        _remote.__wrapped__ = original_remote
        return _remote

    patches.install(PATCH_NAME, *rayapi.method_call(), wrap)
    CompiledDAG = rayapi.compiled_graph_class()
    if CompiledDAG is None:
        return
    for name in GRAPH_PATCHES:
        if hasattr(CompiledDAG, name):
            patches.install(f"ray.dag.CompiledDAG.{name}", CompiledDAG, name, _graph_wrapper(watcher))


def _graph_wrapper(watcher: CallWatcher):
    def wrap(original_execute):
        def execute(self, *args, **kwargs):
            watcher.watch(lambda: watcher.graph(self))
            return original_execute(self, *args, **kwargs)

        execute.__wrapped__ = original_execute
        return execute

    return wrap
