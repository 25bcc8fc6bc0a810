#!/usr/bin/env bash
# Fix Ray's nsight / rocprof-sys runtime-env plugins on this node; run it before `ray start` on every node
# (e.g. in ray.sub). Idempotent.
#
#   scripts/patch_ray_nsight.sh [PYTHON] [--check|--revert] [--ray-dir DIR]
#
# PYTHON (default python3) is the interpreter whose Ray gets fixed. When it can import nrlprof, the installed
# `nrlprof.rayfix.patch_ray` runs; otherwise the patch_ray.py of this checkout runs by path (standard library only;
# it reads fix.py, names.py and plugin_source.py beside it, so copy the whole nrlprof/rayfix/ directory).
# Exit codes: 0 ok, 1 --check found an unfixed plugin, 2 could not patch / Ray not found.
set -euo pipefail

py="python3"
if [[ $# -gt 0 && "$1" != -* ]]; then
    py="$1"
    shift
fi

if ! command -v "$py" >/dev/null 2>&1; then
    echo "patch_ray_nsight.sh: no Python interpreter '$py'; pass the one that runs Ray as the first argument" >&2
    exit 2
fi

if "$py" -c 'import nrlprof.rayfix.patch_ray' >/dev/null 2>&1; then
    exec "$py" -m nrlprof.rayfix.patch_ray "$@"
fi

script="$(dirname -- "${BASH_SOURCE[0]}")/../nrlprof/rayfix/patch_ray.py"
if [[ ! -f "$script" ]]; then
    echo "patch_ray_nsight.sh: '$py' cannot import nrlprof and $script does not exist" >&2
    exit 2
fi
exec "$py" "$script" "$@"
