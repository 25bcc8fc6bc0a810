"""NeMo RL's GRPO loop as far as profiling goes: `maybe_gpu_profile_step` for the policy and the generation
at the top of every step, 1-indexed."""

from nemo_rl.utils.nsys import maybe_gpu_profile_step


def grpo_train(policy, policy_generation, max_num_steps: int) -> None:
    for total_steps in range(max_num_steps):
        maybe_gpu_profile_step(policy, total_steps + 1)
        if policy_generation is not None:
            maybe_gpu_profile_step(policy_generation, total_steps + 1)
        policy.train(total_steps + 1)
