"""The named ranges in a profile: `nrlprof.annotate` (`annotate`), every remote method call of a matched worker
(`method_ranges`), one range per step (`step_ranges`), their names (`names`) and the NVTX module (`nvtx`)."""
