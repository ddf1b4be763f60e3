"""``python -m kinac`` is the ``kinac`` command."""

import sys

from kinac.cli import main

sys.exit(main())
