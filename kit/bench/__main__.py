"""``python -m kit.bench``: see :mod:`kit.bench`."""

import signal
import sys

from kit.bench.cli import main

# a benchmark stopped with SIGTERM (``timeout``, a scheduler) unwinds as on Ctrl-C: its temporary folders go
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
sys.exit(main())
