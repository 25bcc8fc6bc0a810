"""Step anatomy, recorded: every step and every worker group, from Ray's task events and the driver's step marks.

The recorder runs in the driver; the tools read its files (nrlprof.tools.read.anatomy) and turn them into figures.
"""
