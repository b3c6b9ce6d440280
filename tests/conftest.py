"""Shared pytest fixtures: the fixture engine (tests/conftest_fixture.py), the loopback Ray cluster
(tests/raycluster.py: started once per module that asks for it) and real-MNN gating."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from conftest_fixture import (  # noqa: E402,F401
    fixture_candidates_dir,
    fixture_engine,
    fixture_engine_pristine,
    fixture_shared_cache,
    fixture_tasks_dir,
)
from raycluster import cluster  # noqa: E402,F401

MNN_ENV = "MKB_MNN__SOURCE_DIR"
#: the real tree named when the session started (the variable is withheld from the tests not marked mnn)
_SET_TO = os.environ.get(MNN_ENV)
_REAL_TREE = _SET_TO or None


def mnn_source_dir() -> Path | None:
    """The real MNN 3.2.2 tree from MKB_MNN__SOURCE_DIR (the variable the config reads), or None."""
    return Path(_REAL_TREE) if _REAL_TREE else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """MKB_MNN__SOURCE_DIR only while a test marked ``mnn`` runs (its setup, module fixtures included, call and
    teardown).  The environment overrides a config file's keys, so a fixture-engine test's own ``[mnn]
    source_dir`` would otherwise become the real tree (a full MNN build with the fixture's flags); modules read
    it at collection, when it is still set."""
    if _SET_TO is not None:
        if "mnn" in item.keywords:
            os.environ[MNN_ENV] = _SET_TO
        else:
            os.environ.pop(MNN_ENV, None)
    try:
        yield
    finally:
        if _SET_TO is not None:
            os.environ[MNN_ENV] = _SET_TO


#: seconds a real-tree test may take (pyproject's 900 s is for the rest): the first one of a session with an empty
#: cache builds the native baseline (~13 min on 2 cores) and a workspace inside its fixture's setup, which
#: pytest-timeout counts against that test; the aarch64 one also builds the cross baseline (~5 min cold)
MNN_TIMEOUT_S = 3600


def pytest_collection_modifyitems(config, items):
    if mnn_source_dir() is None:
        skip = pytest.mark.skip(reason="needs a real MNN 3.2.2 tree: set MKB_MNN__SOURCE_DIR")
        for item in items:
            if "mnn" in item.keywords:
                item.add_marker(skip)
        return
    for item in items:
        if "mnn" in item.keywords and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(MNN_TIMEOUT_S))
