"""Merging: every torch trace of a run, the memory figures and the step anatomy in one Chrome/Perfetto timeline."""
