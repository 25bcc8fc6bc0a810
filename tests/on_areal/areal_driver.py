"""The AReaL job's driver: `python areal_driver.py <cluster address>`. It runs `areal_job.main` imported, not
`areal_job.py` as `__main__`, so the job's classes are `areal_job`'s, which Ray's workers import by name."""

from __future__ import annotations

import sys

from areal_job import main

main(sys.argv[1])
