"""``python -m cpcreds``: the same as the ``cpcreds`` command (and as fast on a cache hit)."""

import sys

from ._entry import main

sys.exit(main())
