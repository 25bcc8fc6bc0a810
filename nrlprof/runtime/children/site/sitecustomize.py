"""Start-up hook of the processes a matched worker starts: they join its windows (nrlprof.runtime.children.join).

The worker puts this directory first on its children's PYTHONPATH. nrlprof is imported from the copy this file
belongs to when the interpreter has none of its own (a per-worker venv gets nrlprof only through Ray's
`py_modules`). Then the `sitecustomize` this one shadows, if any, runs as it would have. Nothing here may stop
the program: a failure is one line on stderr.
"""

import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_PACKAGE = os.path.dirname(os.path.dirname(_HERE))


def _nrlprof():
    try:
        import nrlprof

        return nrlprof
    except ImportError:
        pass
    spec = importlib.util.spec_from_file_location(
        "nrlprof", os.path.join(_PACKAGE, "__init__.py"), submodule_search_locations=[_PACKAGE]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["nrlprof"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules["nrlprof"]
        raise
    return module


def _join() -> None:
    try:
        _nrlprof()
        from nrlprof.runtime.activation import activate_child

        activate_child(os.environ)
    except Exception as err:
        sys.stderr.write(f"[nrlprof] WARNING this process does not join its worker's windows: {err!r}\n")


def _run_shadowed() -> None:
    """The next `sitecustomize` on sys.path after this directory (a venv's, the distribution's)."""
    later = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", later)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


_join()
_run_shadowed()
