"""The aarch64 cross tools a test needs (compilers, sysroot, qemu): skip the test, saying which Debian packages
to install, where they are missing."""

from __future__ import annotations

import pytest

from kit.host.target import TargetError, make_target
from kit.mnn import toolchain


def skip_without_cross_tools() -> None:
    """Skip the calling test (or fixture) unless the aarch64 cross toolchain and emulator are installed."""
    try:
        toolchain.check_tools(make_target("aarch64"))
    except TargetError as exc:
        pytest.skip(str(exc))
