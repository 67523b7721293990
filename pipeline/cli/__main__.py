"""`python -m fabricref.cli`: the same as the `fabricref` script."""

import sys

from . import main

sys.exit(main())
