"""OpenRLHF's PPO trainer as far as profiling goes: a Ray actor (the controller) given the actor groups the
driver made; each step draws its rollouts, then `train_step(rollout_samples, global_step)` returns
`global_step + 1`; a draw that finds nothing (dynamic filtering) draws again."""

import ray


class SamplesGenerator:
    def __init__(self, prompts) -> None:
        self.prompts = list(prompts)

    def generate_samples(self, **generate_kwargs):
        if not self.prompts:
            return [], 1.0, 0, True
        samples = self.prompts.pop(0)
        return samples, 1.0, len(samples), False


class BasePPOTrainer:
    def __init__(self, actor_model_group) -> None:
        self.actor_model_group = actor_model_group

    def init_checkpoint_states(self) -> dict:
        return {"global_step": 0, "episode": 0, "total_consumed_prompts": 0}

    def train_step(self, rollout_samples, global_step: int):
        ray.get([w.train.remote(global_step + 1) for w in self.actor_model_group])
        return {}, global_step + 1


@ray.remote(num_cpus=0)
class PPOTrainer(BasePPOTrainer):
    def __init__(self, actor_model_group, prompts) -> None:
        self.samples_generator = SamplesGenerator(prompts)
        super().__init__(actor_model_group)

    def fit(self, global_step: int = 0) -> None:
        checkpoint_states = self.init_checkpoint_states()
        if checkpoint_states["global_step"] > 0:
            global_step = checkpoint_states["global_step"]
        while True:
            rollout_samples, _, _, is_exhausted = self.samples_generator.generate_samples()
            if not rollout_samples:
                if is_exhausted:
                    break
                continue
            _, global_step = self.train_step(rollout_samples, global_step)
