"""NeMo RL's `grpo_train` loop as far as profiling goes: at the top of every step, `maybe_gpu_profile_step` for
the policy and for the generation (1-indexed: `total_steps + 1`), then generation, then training."""

from nemo_rl.utils.nsys import maybe_gpu_profile_step


def grpo_train(policy, policy_generation, max_num_steps: int) -> None:
    total_steps = 0
    while total_steps < max_num_steps:
        maybe_gpu_profile_step(policy, total_steps + 1)
        if policy_generation is not None:
            maybe_gpu_profile_step(policy_generation, total_steps + 1)
            policy_generation.generate(total_steps + 1)
        policy.train(total_steps + 1)
        total_steps += 1
