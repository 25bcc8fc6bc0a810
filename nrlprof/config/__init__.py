"""What to profile, read and checked before any worker starts: the plan (`plan`, `steps`), the NRL_* variables
(`variables`, `env`), the YAML sections of nrlprof and of the frameworks (`yaml_config`, `verl`, `rlinf`,
`files`), and nsys's options (`nsys_options`, `nsys_known`). Every bad value is one ConfigError naming the input."""
