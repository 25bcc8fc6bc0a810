"""A site's own runtime-env plugin, `audit_site.AuditPlugin`: the runtime-env agent imports this module when it
starts, and the import leaves a mark `loaded-<pid>` with the agent's pid in the folder `AUDIT_MARK_DIR` names."""

from __future__ import annotations

import os
from pathlib import Path

from ray._private.runtime_env.plugin import RuntimeEnvPlugin

(Path(os.environ["AUDIT_MARK_DIR"]) / f"loaded-{os.getpid()}").write_text("loaded")


class AuditPlugin(RuntimeEnvPlugin):
    name = "audit_site"
