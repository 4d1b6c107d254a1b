"""``python -m cpcreds``: the same as the ``cpcreds`` command."""

import sys

from .cli import main

sys.exit(main())
