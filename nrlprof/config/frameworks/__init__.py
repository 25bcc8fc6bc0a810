"""The frameworks' own profiling sections, read as nrlprof settings with the meaning each framework gives them:
verl's `global_profiler` and role blocks (`verl`), RLinf's `cluster.profiling` (`rlinf`)."""
