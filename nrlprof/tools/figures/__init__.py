"""Turning the records into figures: per worker rank and step (the summary's model), stragglers, memory, HTA,
the step anatomy, and two runs compared."""
