"""Helpers shared by the test modules, by topic: the stand-in profiler tools (`standins`), Ray clusters started once
and shared, `ray start` heads and joining drivers (`clusters`), traces built or recorded for the readers (`traces`)
and traces a run wrote, read back (`trace_reading`), Nsight Systems stand-ins (`nsys`), step-anatomy records
(`anatomy`), memory figures (`memory`), headless Chromium (`browser`), Ray's plugins that patch-ray fixes
(`ray_patch`), verl's example config (`verl_example`), drivers of framework jobs (`framework_jobs`), jobs
that end while a window is open (`job_end`), a vLLM engine on CPU (`vllm_engine`), windows asked for in an
armed job (`on_demand`) and a subcommand that ends as it is told (`fixture_subcommand`).

Test modules import from here, never from one another. What Ray workers import by module name (`workload`,
`worker_shapes`, `engine_shapes`) stays at the top of tests/, which is on their PYTHONPATH.
"""
