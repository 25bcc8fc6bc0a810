"""A stand-in tool that prints its arguments and the environment it was given (the variables named in capitals) as
one JSON line (`python recording_tool.py <arguments>`)."""

from __future__ import annotations

import json
import os
import sys

print(json.dumps({"argv": sys.argv[1:], "env": {k: v for k, v in os.environ.items() if k.isupper()}}))
