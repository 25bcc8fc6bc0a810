"""`python -m trainer_pkg.main`: prints `active <whether nrlprof was active once the package was imported>`."""

import trainer_pkg

print("active", trainer_pkg.ACTIVE_AT_IMPORT)
