"""nox sessions of the MobileKernelBench kit.

    nox -s tests                     unit + fixture-engine tests (no network; real-MNN tests skip unless
                                     MKB_MNN__SOURCE_DIR points at an MNN 3.2.2 tree)
    nox -s quick                     the fast lane: the tests not marked slow, mnn or docker (a few minutes)
    nox -s eval -- --config cfg.toml the main job (arguments are passed to `mkb eval`; a `[generate]` section
                                     generates the model's missing answers first)
    nox -s generate -- --config cfg  a model's answers to the tasks' prompts (`mkb generate`)
    nox -s refine -- --config cfg    answers refined with the kit's feedback, turn by turn (`mkb refine`)
    nox -s tasks -- audit            the task suite (list / generate / audit; audit needs torch)
    nox -s import -- SRC --out DIR   problem files / ONNX models -> task folders (`mkb tasks import`; torch)
    nox -s report -- RUN_DIR         the report of a run
    nox -s bundle -- RUN_DIR         one archive of a run for a reviewer, then validated (`mkb bundle`)
    nox -s reproduce -- BUNDLE       re-run a bundle here and print the verdict (`mkb reproduce`)
    nox -s bench                     speed benchmarks (ratios measured side by side)
    nox -s lint                      ruff

`eval`, `check`, `calibrate`, `report`, `bundle` and `reproduce` run in the Python that runs nox when it has
this checkout's kit (the README's install): no second venv, no pip; `quick` always does.  Otherwise a session
keeps its virtualenv under .nox/ (reused) with the kit installed editable; `tests` and `tasks` add the `tasks`
extra (torch==2.13.0, CPU build).  A session installs only when its venv lacks this checkout's kit with these
extras at this pyproject.toml (a stamp in the venv; `nox -N -s NAME` recreates the venv), so once a session's
venv exists it runs offline, without pip; installs use no build isolation.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from pathlib import Path

import nox
import nox.virtualenv

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = True

ROOT = Path(__file__).resolve().parent
#: the file in a session's venv saying what was installed there (see _install)
STAMP = "mkb-install.txt"


def _kit_here() -> bool:
    """Whether the Python running nox has this checkout's kit installed (the README's install: ``pip install -e``).
    The checkout itself on ``sys.path`` does not count (``python -m nox`` puts the working directory there): a
    Python with nox but without the kit's dependencies then ran ``-m kit.cli`` into a ModuleNotFoundError."""
    saved = sys.path[:]
    sys.path[:] = [p for p in saved if Path(p or ".").resolve() != ROOT]
    try:
        spec = importlib.util.find_spec("kit")
    finally:
        sys.path[:] = saved
    return spec is not None and spec.origin is not None and Path(spec.origin).resolve() == ROOT / "kit" / "__init__.py"


#: the venv backend of the sessions that need the kit without the tasks extra: none (the Python that runs nox)
#: when it already has this checkout's kit, as after the README's install: no second venv, no pip, no minute
#: of installs before the first run; else a venv of their own under .nox/
KIT_BACKEND = "none" if _kit_here() else None


def _mkb(session: nox.Session, *args: str, **kw) -> None:
    """Run ``mkb ARGS`` in the session's Python (nox's own with :data:`KIT_BACKEND` none, else the venv's)."""
    if isinstance(session.virtualenv, nox.virtualenv.PassthroughEnv):
        session.run(sys.executable, "-m", "kit.cli", *args, external=True, **kw)
    else:
        session.run("mkb", *args, **kw)


def _install(session: nox.Session, extras: str = "dev") -> None:
    """The kit, editable, with ``extras``, unless the venv's stamp says this checkout's kit is there with these
    extras at this pyproject.toml (its dependencies and entry points): then nothing runs, not even pip.

    No build isolation: once the dependencies are in the venv, a reinstall works offline too (the tests run
    without network); torch comes from the tasks extra (torch==2.13.0, a CPU build)."""
    if isinstance(session.virtualenv, nox.virtualenv.PassthroughEnv):
        return  # the Python that runs nox: the README's install put the kit there (KIT_BACKEND)
    venv = getattr(session.virtualenv, "location", None)
    stamp = Path(venv) / STAMP if venv else None
    want = (f"{ROOT} [{extras}] pyproject.toml sha256 "
            f"{hashlib.sha256((ROOT / 'pyproject.toml').read_bytes()).hexdigest()}\n")
    if stamp is not None and stamp.is_file() and stamp.read_text() == want:
        session.log(f"the kit [{extras}] is installed in {venv} at this pyproject.toml: no install "
                    "(nox -N recreates the venv)")
        return
    session.install("setuptools>=61")
    session.install("--no-build-isolation", "-e", f".[{extras}]")
    if stamp is not None and stamp.parent.is_dir():
        stamp.write_text(want)


@nox.session(reuse_venv=True)
def tests(session: nox.Session) -> None:
    """The test suite; extra arguments go to pytest.  Installs the tasks extra (torch) for the audit tests."""
    _install(session, "dev,tasks")
    # the slowest tests named at the end: where CI's time goes; on Ctrl-C (or CI's time limit) pytest gets 30 s to
    # tear its fixtures down and print what ran (nox's default 0.3 s is too short for that)
    session.run("pytest", "-q", "-ra", "--durations=25", *session.posargs, env={"PYTHONDONTWRITEBYTECODE": "1"},
                interrupt_timeout=30)


#: the fast lane's selection: what needs neither a real MNN tree nor a Docker daemon and takes at most a few seconds
QUICK = "not slow and not mnn and not docker"


@nox.session(venv_backend="none", default=False)
def quick(session: nox.Session) -> None:
    """The fast lane (a few minutes): the tests not marked slow, mnn or docker, in the Python that runs nox (the
    README's install: no venv to make, nothing installed; torch tests skip without the tasks extra).  Extra
    arguments go to pytest.  Before a push, `nox -s tests` runs everything, as CI does."""
    probe = session.run(sys.executable, "-P", "-c", "import kit, pytest, pytest_timeout", silent=True,
                        success_codes=[0, 1], external=True)
    if probe:  # silent=True returns the output: an ImportError's traceback
        session.error("nox -s quick runs in the Python that runs nox, which lacks the kit or pytest: activate the "
                      "README's venv (pip install -e '.[dev]'), or run nox -s tests -- -m '" + QUICK + "'")
    session.run(sys.executable, "-m", "pytest", "-q", "-ra", "-m", QUICK, *session.posargs,
                env={"PYTHONDONTWRITEBYTECODE": "1"}, external=True, interrupt_timeout=30)


@nox.session(reuse_venv=True, default=False, venv_backend=KIT_BACKEND)
def eval(session: nox.Session) -> None:  # noqa: A001 - the session is called eval on purpose
    """`mkb eval`; pass `-- --config configs/default.toml`."""
    _install(session)
    args = session.posargs or ["--config", "configs/default.toml"]
    _mkb(session, "eval", *args)


@nox.session(reuse_venv=True, default=False, venv_backend=KIT_BACKEND)
def generate(session: nox.Session) -> None:
    """`mkb generate`: a model's answers to the tasks' prompts; pass `-- --config cfg.toml` (a `[generate]` section)."""
    _install(session)
    _mkb(session, "generate", *session.posargs)


@nox.session(reuse_venv=True, default=False, venv_backend=KIT_BACKEND)
def refine(session: nox.Session) -> None:
    """`mkb refine`: answers refined with the kit's feedback; pass `-- --config cfg.toml` (`[generate]`, `[refine]`)."""
    _install(session)
    _mkb(session, "refine", *session.posargs)


@nox.session(reuse_venv=True, default=False, venv_backend=KIT_BACKEND)
def check(session: nox.Session) -> None:
    """`mkb check` for one candidate; pass `-- --task ID --files A.cpp`."""
    _install(session)
    _mkb(session, "check", *session.posargs)


@nox.session(reuse_venv=True, default=False, venv_backend=KIT_BACKEND)
def calibrate(session: nox.Session) -> None:
    """`mkb calibrate`: native method on every task of the split."""
    _install(session)
    _mkb(session, "calibrate", *(session.posargs or ["--config", "configs/calibrate.toml"]))


@nox.session(reuse_venv=True, default=False)
def tasks(session: nox.Session) -> None:
    """`mkb tasks ...` (default: audit).  Installs the tasks extra (torch==2.13.0)."""
    _install(session, "dev,tasks")
    session.run("mkb", "tasks", *(session.posargs or ["audit"]))


@nox.session(name="import", reuse_venv=True, default=False)
def import_tasks(session: nox.Session) -> None:
    """`mkb tasks import ...`: pass `-- SRC... --out DIR` or `-- --official CHECKOUT --out DIR`."""
    _install(session, "dev,tasks")
    if not session.posargs:
        session.error("pass the sources and --out: nox -s import -- SRC... --out DIR")
    session.run("mkb", "tasks", "import", *session.posargs)


@nox.session(reuse_venv=True, default=False, venv_backend=KIT_BACKEND)
def report(session: nox.Session) -> None:
    """`mkb report RUN_DIR [RUN_DIR ...]`."""
    _install(session)
    _mkb(session, "report", *(session.posargs or ["runs/default"]))


@nox.session(reuse_venv=True, default=False, venv_backend=KIT_BACKEND)
def bundle(session: nox.Session) -> None:
    """`mkb bundle RUN_DIR [--out FILE]`, then `mkb validate` on the archive it wrote."""
    _install(session)
    args = session.posargs or ["runs/default"]
    out = args[args.index("--out") + 1] if "--out" in args else f"{args[0].rstrip('/')}/bundle.tar.gz"
    _mkb(session, "bundle", *args)
    _mkb(session, "validate", out)


@nox.session(reuse_venv=True, default=False, venv_backend=KIT_BACKEND)
def reproduce(session: nox.Session) -> None:
    """`mkb reproduce BUNDLE [--run-dir DIR] [overrides]`: exits 1 on a real difference."""
    _install(session)
    if not session.posargs:
        session.error("pass the bundle: nox -s reproduce -- BUNDLE [--run-dir DIR] [--mnn.source_dir DIR ...]")
    _mkb(session, "reproduce", *session.posargs, env={k: v for k, v in os.environ.items() if k.startswith("MKB_")})


@nox.session(reuse_venv=True, default=False)
def bench(session: nox.Session) -> None:
    """Benchmarks: kit overhead vs raw steps, resume setup time; `-- --scaling`: 1 vs 2 build workers (fixed start,
    steady throughput, scaling efficiency, Ray overhead per job).  Real MNN tree when MKB_MNN__SOURCE_DIR is set."""
    _install(session)
    session.run("python", "-m", "kit.bench", *session.posargs, env={k: v for k, v in os.environ.items() if k.startswith("MKB_")})


@nox.session(reuse_venv=True, default=False)
def lint(session: nox.Session) -> None:
    _install(session)
    session.run("ruff", "check", "kit", "tests")


@nox.session(reuse_venv=True, default=False)
def images(session: nox.Session) -> None:
    """The pinned Docker images (images/, kit/images/); needs a daemon (DOCKER_HOST).

    nox -s images                                   build linux/amd64 (MNN downloaded), then check it
    nox -s images -- build --arch arm64 --mnn-dir DIR   other commands: lock, base, build, apt, check
    """
    _install(session, "dev")
    if session.posargs:
        session.run("python", "-m", "kit.images", *session.posargs)
    else:
        session.run("python", "-m", "kit.images", "build", "--arch", "amd64")
        session.run("python", "-m", "kit.images", "check", "--arch", "amd64")
