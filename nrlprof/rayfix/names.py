"""Names shared by the agent hook, `RAY_RUNTIME_ENV_PLUGINS` handling, `patch-ray` and `doctor`.

No imports: `patch_ray.py` loads this file by path on nodes where nrlprof is not installed.
"""

PLUGINS_VARIABLE = "RAY_RUNTIME_ENV_PLUGINS"
HOOK_CLASS_PATH = "nrlprof.rayfix.agent_hook.AgentHook"
# The shell assignment that makes `ray start` give its runtime-env agent the in-memory fix.
HOOK_SETTING = PLUGINS_VARIABLE + '=\'[{"class": "' + HOOK_CLASS_PATH + "\"}]'"

# States of one Ray plugin file, as `patch-ray --check` and `doctor` report them.
PATCHED = "patched"
UNPATCHED = "unpatched"
UPSTREAM_FIXED = "upstream-fixed"
MISSING = "missing"
UNRECOGNISED = "unrecognised"
FIXED_STATES = (PATCHED, UPSTREAM_FIXED)
