"""What to profile, read and checked before any worker starts: the plan (`plan`, `steps`), the NRL_* variables
(`variables`, `env`), nrlprof's YAML sections and files (`yaml_config`, `files`), the frameworks' own sections
(`frameworks/`) and nsys's options (`nsys/`). Every bad value is one ConfigError naming the input."""
