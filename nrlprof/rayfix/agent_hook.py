"""The runtime-env agent hook: importing this module fixes Ray's profiler plugins in memory.

Ray's runtime-env agent imports every class listed in `RAY_RUNTIME_ENV_PLUGINS`
when it starts.  Listing `AgentHook` there makes the agent import this module,
which installs the fixed plugin methods through nrlprof's patch registry; the
hook itself handles no field.
"""

from __future__ import annotations

from ray._private.runtime_env.nsight import NsightPlugin
from ray._private.runtime_env.plugin import RuntimeEnvPlugin
from ray._private.runtime_env.rocprof_sys import RocProfSysPlugin

from nrlprof.process import patches
from nrlprof.rayfix.fix import FIXED_METHODS


def install_plugin_fixes() -> tuple[str, ...]:
    """Swap in the fixed `create` / `modify_context` of both plugins; returns the patch names."""
    names = []
    for plugin_class in (NsightPlugin, RocProfSysPlugin):
        for attribute, replacement in FIXED_METHODS[plugin_class.__name__].items():
            name = f"ray.{plugin_class.__name__}.{attribute}"
            patches.install(name, plugin_class, attribute, lambda _original, fixed=replacement: fixed)
            names.append(name)
    return tuple(names)


PATCH_NAMES = install_plugin_fixes()


class AgentHook(RuntimeEnvPlugin):
    name = "_nrlprof_agent_hook"
