"""verl's own nsight guide example (seed 000, verbatim): the YAML that the config tests parse and a real
cluster runs."""

VERL_EN_SHARED = """
    trainer:
        profile_steps: [1, 2, 5]  # Profile steps 1, 2, and 5

    actor_rollout_ref:
        actor:
            profile_discrete: False
            profile_ranks: [0, 1]  # Only profile ranks 0 and 1 for actor
        rollout:
            profile_discrete: False
            profile_ranks: null    # Profile all ranks for rollout
        ref:
            profile_discrete: False  # Disable profiling for ref policy
    critic:
        profile_discrete: False
        profile_ranks: [0]      # Only profile rank 0 for critic
"""
