"""nrlprof running in a job's processes. At the top: the activation, the one composition root that wires the rest
together (`activation`), the parts it builds: a controller's (`controller`) and a profiled process's (`profiled`);
the hooks into Ray that create and set up matched workers (`creation_hook`, `worker_setup`), the job's end and
settings (`job_end`, `job_env`). In rooms: where steps come from (`steps/`), windows opened and closed in the workers
(`windows/`), the processes a worker starts (`children/`)."""
