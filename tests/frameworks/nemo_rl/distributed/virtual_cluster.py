"""NeMo RL's RayVirtualCluster, as far as its worker groups read it: nodes of bundles, one worker per bundle.

No placement groups here (NeMo RL reserves one per node): the workers need no resources on a CPU test cluster."""


class RayVirtualCluster:
    def __init__(self, bundle_ct_per_node_list: list[int], use_gpus: bool = False, num_gpus_per_node: int = 0):
        self._bundle_ct_per_node_list = bundle_ct_per_node_list
        self.use_gpus = use_gpus
        self.num_gpus_per_node = num_gpus_per_node
        self.max_colocated_worker_groups = 1

    def world_size(self) -> int:
        return sum(self._bundle_ct_per_node_list)

    def get_placement_groups(self) -> list[None]:
        return [None] * len(self._bundle_ct_per_node_list)

    def get_master_address_and_port(self) -> tuple[str, int]:
        return "127.0.0.1", 29500
