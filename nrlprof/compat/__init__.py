"""Drop-ins for code written against other RL frameworks' profiling helpers."""
