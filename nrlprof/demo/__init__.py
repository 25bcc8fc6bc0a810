"""`nrlprof demo`: the bundled RL-shaped Ray job (`job`), profiled and then summarised (`cli`)."""
