"""The names the Ray fix's modules read, in a fresh interpreter with no PYTHONPATH (nrlprof as it is installed):
`python rayfix_names_probes.py <probe> [argument]`; each prints its finding as one JSON line.

- `hook_class`: the agent hook class's module and qualified name.
- `patch_ray_by_path <path of patch_ray.py>`: the names `patch_ray.py` holds when run by path, as `ray start`'s
  setup runs it with no nrlprof importable.
- `agent_hook_patches`: which of Ray's profiler plugin methods the agent hook's import replaced with the fix's, the
  patches installed, the hook's patch names, and whether uninstalling them restored Ray's own methods."""

from __future__ import annotations

import json
import sys


def hook_class() -> object:
    from nrlprof.rayfix.agent_hook import AgentHook

    return f"{AgentHook.__module__}.{AgentHook.__qualname__}"


def patch_ray_by_path(path: str) -> object:
    import runpy

    module = runpy.run_path(path, run_name="patch_ray_by_path")
    return {
        "hook": module["HOOK_CLASS_PATH"],
        "setting": module["HOOK_SETTING"],
        "fixed": list(module["FIXED_STATES"]),
        "error_bases": [base.__name__ for base in module["PatchError"].__mro__],
    }


def agent_hook_patches() -> object:
    from ray._private.runtime_env.nsight import NsightPlugin
    from ray._private.runtime_env.rocprof_sys import RocProfSysPlugin

    originals = {c: dict(vars(c)) for c in (NsightPlugin, RocProfSysPlugin)}

    import nrlprof.rayfix.agent_hook as hook
    from nrlprof.process import patches
    from nrlprof.rayfix import fix

    methods = ("create", "modify_context")
    fixed = all(vars(c)[name] is fix.FIXED_METHODS[c.__name__][name] for c in originals for name in methods)
    installed = sorted(patches.installed())
    patches.uninstall_all()
    restored = all(vars(c)[name] is originals[c][name] for c in originals for name in methods)
    return {"fixed": fixed, "installed": installed, "names": sorted(hook.PATCH_NAMES), "restored": restored}


if __name__ == "__main__":
    probe = {"hook_class": hook_class, "patch_ray_by_path": patch_ray_by_path, "agent_hook_patches": agent_hook_patches}
    print(json.dumps(probe[sys.argv[1]](*sys.argv[2:])))
