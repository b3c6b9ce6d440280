"""``python -m kit.images ...``: see :mod:`kit.images.cli`."""

import sys

from kit.images.cli import main

sys.exit(main())
