"""The runtime-env agent hook: importing this module fixes Ray's profiler plugins in memory.

Ray's runtime-env agent imports every class listed in `RAY_RUNTIME_ENV_PLUGINS`
when it starts.  Listing `AgentHook` there makes the agent import this module,
which swaps in the fixed plugin methods; the hook itself handles no field.
"""

from ray._private.runtime_env.nsight import NsightPlugin
from ray._private.runtime_env.plugin import RuntimeEnvPlugin
from ray._private.runtime_env.rocprof_sys import RocProfSysPlugin

from nrlprof.rayfix.fix import apply_nsight_fix, apply_rocprof_fix

apply_nsight_fix(NsightPlugin)
apply_rocprof_fix(RocProfSysPlugin)


class AgentHook(RuntimeEnvPlugin):
    name = "_nrlprof_agent_hook"
