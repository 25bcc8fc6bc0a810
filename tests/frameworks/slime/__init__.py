"""A stand-in for slime (THUDM/slime, not on the package index), written from slime's source at the commit in
`COMMIT`, with its module paths and names, as far as nrlprof acts on them: the driver's train loop
(`tests/frameworks/slime_train.py`, slime's `train.py`), `RayTrainGroup` making one actor class for the actor and
critic roles, `MegatronTrainRayActor` with slime's `TrainProfiler` and its profiling switches, the `RolloutManager`
actor creating `SGLangEngine` actors and setting the rollout id. No Megatron, no SGLang, no GPU: the work is a
matmul."""
