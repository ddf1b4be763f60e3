"""``python -m kinac`` is the ``kinac`` command: forwarded to a live build server when one
serves this workspace (:mod:`kinac.server.client`, which imports almost nothing), else run here."""

import sys

from kinac.server.client import main

sys.exit(main())
