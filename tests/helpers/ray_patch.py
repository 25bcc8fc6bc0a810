"""Ray's two runtime-env plugins that `nrlprof patch-ray` fixes: their paths under Ray's package, the line each
gets wrong, and how a test loads or edits a copy of them."""

from __future__ import annotations

import importlib.util
import uuid
from pathlib import Path
from types import ModuleType

NSIGHT = "_private/runtime_env/nsight.py"
ROCPROF = "_private/runtime_env/rocprof_sys.py"
BUGGY_LINES = {
    NSIGHT: 'context.py_executable = " ".join(self.nsight_cmd) + " python"',
    ROCPROF: 'context.py_executable = " ".join(self.rocprof_sys_cmd)\n',
}


def load_module(path: Path) -> ModuleType:
    """Import a (patched) plugin file under a fresh name; it imports the real Ray's modules."""
    spec = importlib.util.spec_from_file_location(f"patched_{path.stem}_{uuid.uuid4().hex}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rewrite(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
