"""RLinf: the runners' own step counter drives the windows, and RLinf's own step-gated profiling stands down.

RLinf counts steps from 0 (`global_step` / `global_steps` at the top of a step), and its
`cluster.profiling.steps` counts them the same way, so nrlprof takes that number as the step: a step
range means the same steps as in RLinf's own config. The embodied runners ask `_should_profile_step(step)`
at the top of every step; the reasoning runner puts each batch in (`_put_batch`) at the top of its steps.
While nrlprof profiles, `_should_profile_step` answers False, so RLinf's own windows do not also open.
"""

from __future__ import annotations

from typing import Any

from nrlprof.runtime import patches


def take_embodied_steps(session: Any, module: Any) -> None:
    def wrap(original):
        def _should_profile_step(self, step_idx, *args, **kwargs):
            session.framework_step(int(step_idx), "RLinf's embodied runner (global_step)")
            if session.plan.active:
                return False
            return original(self, step_idx, *args, **kwargs)

        return _should_profile_step

    patches.install("rlinf EmbodiedRunner._should_profile_step", module.EmbodiedRunner, "_should_profile_step", wrap)


def take_reasoning_steps(session: Any, module: Any) -> None:
    def wrap(original):
        def _put_batch(self, *args, **kwargs):
            session.framework_step(int(self.global_steps), "RLinf's reasoning runner (global_steps)")
            return original(self, *args, **kwargs)

        return _put_batch

    patches.install("rlinf ReasoningRunner._put_batch", module.ReasoningRunner, "_put_batch", wrap)
