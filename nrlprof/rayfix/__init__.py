"""Ray's nsight and rocprof-sys runtime_env plugins, fixed (`fix`): in this process, in the runtime-env agent of
each node through its plugin list (`agent_hook`, `plugins_env`, `node_agent`), on disk (`patch_ray`), and found
unfixed on a running cluster (`cluster_fix`)."""
