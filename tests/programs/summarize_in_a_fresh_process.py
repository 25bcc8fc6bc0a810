"""A fresh process (one thread) that summarizes a run's traces with three readers: prints the start method of the
readers' pool and the summary, as JSON (`python summarize_in_a_fresh_process.py <run folder>`)."""

from __future__ import annotations

import json
import sys

from nrlprof.tools.figures.summarize import summarize
from nrlprof.tools.read.pool import start_context

method = start_context("nrlprof.tools.figures.trace_pool").get_start_method()
print(json.dumps([method, summarize(sys.argv[1], nsys="", jobs=3).to_json()]))
