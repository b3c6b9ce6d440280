"""Pytest fixtures for the fixture engine (``tests/fixture_engine``), the small MNN stand-in used in CI.

Import them from ``tests/conftest.py``::

    from conftest_fixture import (  # noqa: F401
        fixture_engine, fixture_engine_pristine, fixture_tasks_dir, fixture_candidates_dir,
    )

The engine tree mirrors MNN's layout (``CMakeLists.txt``, ``source/``, ``tools/converter``,
``tools/script/register.py``, ``tools/runner``); a copy never contains ``tasks/``, ``candidates/`` or
build outputs.  ``fixture_tasks_dir`` is a task suite (``<category>/<task_id>/``) and
``fixture_candidates_dir`` a candidate directory with method ``sample``
(``sample/<task_id>/<sample_id>/<files>``, samples ``correct``, ``compile_error``, ``wrong_result``,
``crash``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kit.mnn.source import copy_fixture_tree

FIXTURE_ROOT = Path(__file__).resolve().parent / "fixture_engine"
#: entries of FIXTURE_ROOT that are not part of the engine tree
_NOT_ENGINE = {"tasks", "candidates", "make_tasks.py", "README.md", "__pycache__"}


def fixture_config_text(run_dir: str | Path = "run", **mnn: str | Path) -> str:
    """The TOML head every fixture-engine config shares: ``[run] dir``, the fixture's task suite (all splits),
    its sample candidates as method ``sample``, and ``[mnn]`` with ``engine = "fixture"`` plus the ``mnn`` keys
    given (``source_dir``, ``cache_dir``; relative paths resolve against the config file).  Append further
    sections to it."""
    mnn_lines = "".join(f'{k} = "{v}"\n' for k, v in mnn.items())
    return f"""
[run]
dir = "{run_dir}"
[tasks]
dir = "{FIXTURE_ROOT / 'tasks'}"
split = "all"
[[candidates.sources]]
method = "sample"
path = "{FIXTURE_ROOT / 'candidates' / 'sample'}"
[mnn]
engine = "fixture"
{mnn_lines}"""


def copy_fixture_engine(dest: Path) -> Path:
    """Copy the engine tree to ``dest`` (which must not exist), with the kit's runner headers it includes
    (:func:`kit.mnn.source.copy_fixture_tree`), and return ``dest``.

    Raises:
        FileExistsError: ``dest`` exists.
    """
    dest = Path(dest)
    if dest.exists():
        raise FileExistsError(f"{dest}: destination of the fixture engine copy already exists")

    def ignore(directory: str, names: list[str]) -> set[str]:
        top = Path(directory) == FIXTURE_ROOT
        return {n for n in names if (top and n in _NOT_ENGINE) or n == "__pycache__" or n.startswith("build")}

    shutil.copytree(FIXTURE_ROOT, dest, ignore=ignore)
    copy_fixture_tree(None, dest)  # the kit's runner headers the engine's runner includes (one source, the kit's)
    return dest


@pytest.fixture
def fixture_engine(tmp_path: Path) -> Path:
    """A fresh, writable copy of the engine tree (per test) under ``tmp_path/fixture_engine``."""
    return copy_fixture_engine(tmp_path / "fixture_engine")


@pytest.fixture(scope="session")
def fixture_engine_pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One copy of the engine tree per session; treat it as read-only (e.g. ``mnn.source_dir``)."""
    return copy_fixture_engine(tmp_path_factory.mktemp("fixture_pristine") / "fixture_engine")


@pytest.fixture(scope="session")
def fixture_tasks_dir() -> Path:
    """The fixture task suite (read-only): ``<category>/<task_id>/{task.toml, model.py, model.onnx}``."""
    return FIXTURE_ROOT / "tasks"


@pytest.fixture(scope="session")
def fixture_candidates_dir() -> Path:
    """The sample candidates (read-only): ``sample/<task_id>/<sample_id>/<files>``."""
    return FIXTURE_ROOT / "candidates"


@pytest.fixture(scope="session")
def fixture_shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One ``mnn.cache_dir`` per session for tests that only need the native build of
    :func:`fixture_engine_pristine` (built once there, for all of them)."""
    return tmp_path_factory.mktemp("fixture_cache")


def wait_for_state(pid: int, state: str = "S", limit_s: float = 10.0) -> str:
    """Poll /proc/<pid>/stat until the process is in ``state`` (e.g. "S": blocked, as a runner waiting at its
    rendezvous) or ``limit_s`` seconds have passed; returns the last state seen ("-" once it is gone)."""
    import time

    deadline = time.monotonic() + limit_s
    while True:
        try:
            seen = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            seen = "-"
        if seen == state or time.monotonic() >= deadline:
            return seen
        time.sleep(0.01)
