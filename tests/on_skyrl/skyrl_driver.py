"""The SkyRL job's driver: `python skyrl_driver.py <cluster address>`. It runs `skyrl_job.main` imported, not
`skyrl_job.py` as `__main__`, so the job's classes and its entry point task are `skyrl_job`'s, which Ray's workers
import by name."""

from __future__ import annotations

import sys

from skyrl_job import main

main(sys.argv[1])
