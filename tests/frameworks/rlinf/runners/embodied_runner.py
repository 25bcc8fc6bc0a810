"""RLinf's embodied runner as far as profiling goes: `global_step` counts from 0 at the top of each step, and
`cluster.profiling.steps` (here `profile_steps`) opens RLinf's own window at the steps it lists."""

import ray


class EmbodiedRunner:
    def __init__(self, actor, max_steps: int, profile_steps=(2, 3)) -> None:
        self.actor = actor
        self.max_steps = max_steps
        self.global_step = 0
        self._profile_steps = set(profile_steps)
        self.own_windows: list[int] = []

    def _should_profile_step(self, step_idx: int) -> bool:
        return step_idx in self._profile_steps

    def _open_profiling_window(self, step_idx: int) -> None:
        self.own_windows.append(step_idx)

    def run(self) -> None:
        for _step in range(self.global_step, self.max_steps):
            profiled_step = self.global_step if self._should_profile_step(self.global_step) else None
            if profiled_step is not None:
                self._open_profiling_window(profiled_step)
            ray.get(self.actor.train.remote(self.global_step))
            self.global_step += 1
