"""The actor method calls a controller submits: steps begin at them (NRL_STEP_METHOD), and they reveal profiled
workers the controller did not create (nrlprof.runtime.adoption). Ray's and nrlprof's own calls
(`__ray_call__`, `__ray_ready__`) are left alone."""

from __future__ import annotations

import threading
from typing import Any

from nrlprof.runtime import patches
from nrlprof.runtime.step_marker import StepMarker, actor_names

PATCH_NAME = "ray.actor.ActorMethod._remote"


def install(session: Any) -> None:
    from ray.actor import ActorMethod

    method = session.plan.step_method
    marker = StepMarker(method) if method is not None else None
    adoption = session.adoption
    # Steps are taken in order: a second thread's call waits until the step's window actions are queued.
    order = threading.Lock()

    def wrap(original_remote):
        def _remote(self, *args, **kwargs):
            method_name = self._method_name
            if not method_name.startswith("__"):
                handle = self._actor
                adoption.called(handle)
                if marker is not None:
                    with order:
                        step = marker.new_step(actor_names(handle, session.known_actors), method_name)
                        if step is not None:
                            session.marker_step(step, marker.description)
            return original_remote(self, *args, **kwargs)

        _remote.__wrapped__ = original_remote
        return _remote

    patches.install(PATCH_NAME, ActorMethod, "_remote", wrap)
