"""OpenRLHF: the PPO trainer's step counter drives the windows.

OpenRLHF's `PPOTrainer` is a Ray actor (the controller). Its `fit` keeps the trained steps in a local
`global_step`; each step first draws its rollouts with `SamplesGenerator.generate_samples`, then trains
(`train_step` returns `global_step + 1`). So a draw begins step `global_step + 1`, read from `fit`'s frame;
draws repeated within a step (dynamic filtering) are the same step, and a resumed run counts on from its
checkpoint. Where the caller keeps no `global_step`, draws are counted: each one after a draw that gave samples
begins the next step.

Only `SamplesGenerator` is patched: Ray copies the methods of an actor class and its bases (`PPOTrainer`,
`BasePPOTrainer`) when `@ray.remote` makes it, so patching those later would change nothing.
"""

from __future__ import annotations

import sys
from types import ModuleType

from nrlprof.process import patches
from nrlprof.process.host import ControllerHost

STEP_SOURCE = "OpenRLHF's PPO trainer (global_step)"


def take_trainer_steps(session: ControllerHost, module: ModuleType) -> None:
    generator = getattr(module, "SamplesGenerator", None)
    if generator is None:
        return
    counted = {"steps": 0, "gave_samples": True}

    def step_of_draw(caller_locals: dict) -> int:
        trained = caller_locals.get("global_step")
        if isinstance(trained, int):
            return trained + 1
        if counted["gave_samples"]:
            counted["steps"] += 1
        return counted["steps"]

    def wrap_draw(original):
        def generate_samples(self, *args, **kwargs):
            session.framework_step(step_of_draw(sys._getframe(1).f_locals), STEP_SOURCE)
            drawn = original(self, *args, **kwargs)
            counted["gave_samples"] = bool(drawn and drawn[0])
            return drawn

        return generate_samples

    patches.install("openrlhf SamplesGenerator.generate_samples", generator, "generate_samples", wrap_draw)
