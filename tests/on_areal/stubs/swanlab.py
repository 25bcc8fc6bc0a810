"""AReaL's stats logger imports its tracking backends at module level; no test logs to one."""
