"""slime.ray.actor_group.RayTrainGroup: a role's ranks, one actor class made with `ray.remote` per group (the same
`MegatronTrainRayActor` for the actor and the critic), created in rank order, unnamed; the role given at `init`.
On CPU the ranks ask no GPU and no placement group."""

from __future__ import annotations

import ray


class RayTrainGroup:
    def __init__(self, args, num_nodes, num_gpus_per_node, pg, num_gpus_per_actor=1, role="actor", with_ref=False,
                 with_opd_teacher=False, actor_cls=None):  # fmt: skip
        self.args = args
        self._num_nodes = num_nodes
        self._num_gpus_per_node = num_gpus_per_node
        self._pg = pg
        self._num_gpus_per_actor = num_gpus_per_actor
        self.role = role
        self._actor_cls = actor_cls
        self._with_ref = with_ref
        self._with_opd_teacher = with_opd_teacher
        self._rollout_manager = None
        self._actor_handlers = []

    def _allocate_gpus_for_actor(self, pg, num_gpus_per_actor):
        world_size = self._num_nodes * self._num_gpus_per_node
        if self._actor_cls is None:
            from slime.backends.megatron_utils.actor import MegatronTrainRayActor

            actor_impl = MegatronTrainRayActor
        else:
            actor_impl = self._actor_cls
        actor_options = {"num_gpus": 0, "runtime_env": {"env_vars": dict(self.args.train_env_vars)}}
        TrainRayActor = ray.remote(**actor_options)(actor_impl)
        self._actor_handlers = []
        master_addr, master_port = None, None
        for rank in range(world_size):
            actor = TrainRayActor.options(num_cpus=0, num_gpus=0).remote(world_size, rank, master_addr, master_port)
            if rank == 0:
                master_addr, master_port = ray.get(actor.get_master_addr_and_port.remote())
            self._actor_handlers.append(actor)

    def async_train(self, rollout_id, rollout_data_ref, external_data=None):
        if isinstance(external_data, list):
            assert len(external_data) == len(self._actor_handlers)
            return [actor.train.remote(rollout_id, rollout_data_ref, external_data=ed)
                    for actor, ed in zip(self._actor_handlers, external_data, strict=False)]  # fmt: skip
        return [actor.train.remote(rollout_id, rollout_data_ref, external_data=external_data)
                for actor in self._actor_handlers]  # fmt: skip

    def save_model(self, rollout_id, force_sync=False):
        return ray.get([actor.save_model.remote(rollout_id, force_sync=force_sync) for actor in self._actor_handlers])

    def update_weights(self):
        return ray.get([actor.update_weights.remote() for actor in self._actor_handlers])

    def create(self, rollout_manager=None):
        if self._actor_handlers:
            return None
        if rollout_manager is not None:
            self._rollout_manager = rollout_manager
        self._allocate_gpus_for_actor(self._pg, self._num_gpus_per_actor)
        start_rollout_ids = ray.get([actor.init.remote(self.args, self.role, with_ref=self._with_ref,
                                                       with_opd_teacher=self._with_opd_teacher)
                                     for actor in self._actor_handlers])  # fmt: skip
        if self._rollout_manager is not None:
            self.set_rollout_manager(self._rollout_manager)
        return start_rollout_ids

    def clear_memory(self):
        return ray.get([actor.clear_memory.remote() for actor in self._actor_handlers])

    def set_rollout_manager(self, rollout_manager):
        self._rollout_manager = rollout_manager
        return ray.get([actor.set_rollout_manager.remote(rollout_manager) for actor in self._actor_handlers])
