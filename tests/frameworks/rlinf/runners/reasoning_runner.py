"""RLinf's reasoning runner as far as profiling goes: each step puts its batch in first (`_put_batch`), and
`global_steps` counts the steps done, from 0."""

import ray


class ReasoningRunner:
    def __init__(self, actor, batches) -> None:
        self.actor = actor
        self.train_dataloader = list(batches)
        self.global_steps = 0

    def _put_batch(self, batch) -> None:
        self.batch = batch

    def run(self) -> None:
        for batch in self.train_dataloader:
            self._put_batch(batch)
            ray.get(self.actor.train.remote(self.global_steps))
            self.global_steps += 1
