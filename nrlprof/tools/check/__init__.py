"""Checking a running cluster for what profiled workers need (`nrlprof doctor`): per-node checks and a canary."""
