"""``python -m kit.bench``: see :mod:`kit.bench`."""

import sys

from kit.bench.cli import main

sys.exit(main())
