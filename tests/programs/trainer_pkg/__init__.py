"""A trainer package that imports nrlprof when it is imported, as `python -m trainer_pkg.main` does first: whether
nrlprof was active right after its import."""

import nrlprof

ACTIVE_AT_IMPORT = nrlprof.is_active()
