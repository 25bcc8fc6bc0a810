"""nrlprof running in a job's processes: the activation that wires the rest together (`activation`), the session
and its gate, which open and close windows in the workers (`session`, `gate`, `dispatch`), where steps come from
(`step_sources`, `step_marker`, `call_hook`, `adoption`), how the job ends (`job_end`, `deaths`), and the
processes a worker starts (`child*`, `child_site/`, `engine_switches`)."""
