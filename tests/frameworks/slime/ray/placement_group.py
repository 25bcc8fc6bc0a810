"""slime.ray.placement_group: the driver's helpers that make the rollout manager and the train groups (placement
groups are GPU bundles in slime; none on CPU)."""

from __future__ import annotations

import copy

from slime.ray.actor_group import RayTrainGroup


def create_placement_groups(args):
    return {"actor": None, "rollout": None, "critic": None}


def allocate_train_group(args, num_nodes, num_gpus_per_node, pg, role="actor", with_ref=False,
                         with_opd_teacher=False, actor_cls=None):  # fmt: skip
    return RayTrainGroup(args=args, num_nodes=num_nodes, num_gpus_per_node=num_gpus_per_node, pg=pg,
                         num_gpus_per_actor=0.4, role=role, with_ref=with_ref, with_opd_teacher=with_opd_teacher,
                         actor_cls=actor_cls)  # fmt: skip


def create_actor_model(args, pgs, rollout_manager, actor_cls=None):
    actor_model = allocate_train_group(args=args, num_nodes=args.actor_num_nodes,
                                       num_gpus_per_node=args.actor_num_gpus_per_node, pg=pgs["actor"], with_ref=True,
                                       actor_cls=actor_cls)  # fmt: skip
    return actor_model, actor_model.create(rollout_manager=rollout_manager)


def create_training_models(args, pgs, rollout_manager, actor_cls=None):
    actor_model, start_rollout_ids = create_actor_model(args, pgs, rollout_manager, actor_cls=actor_cls)
    critic_model = None
    if args.use_critic and args.num_rollout != 0:
        critic_model = allocate_train_group(args=copy.deepcopy(args), num_nodes=args.critic_num_nodes,
                                            num_gpus_per_node=args.critic_num_gpus_per_node, pg=pgs["critic"],
                                            role="critic")  # fmt: skip
        start_rollout_ids = critic_model.create(rollout_manager=rollout_manager)
    if args.start_rollout_id is None:
        args.start_rollout_id = start_rollout_ids[0]
    return actor_model, critic_model


def create_rollout_manager(args, pg):
    from slime.ray.rollout import RolloutManager

    rollout_manager = RolloutManager.options(num_cpus=0, num_gpus=0).remote(args, pg)
    return rollout_manager, None
