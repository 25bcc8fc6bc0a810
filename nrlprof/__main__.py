import sys

from nrlprof.cli import main

sys.exit(main())
