"""An interpreter wrapper like `uv run ... python`: the interpreter runs as this process's child, so nsys's %p is this
process; it exits with the interpreter's exit code (`python uv_like_wrapper.py <interpreter> <its arguments>`)."""

from __future__ import annotations

import subprocess
import sys

sys.exit(subprocess.call(sys.argv[1:]))
