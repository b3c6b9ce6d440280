"""nox sessions of the MobileKernelBench kit.

    nox -s tests                     unit + fixture-engine tests (no network; real-MNN tests skip unless
                                     MKB_MNN__SOURCE_DIR points at an MNN 3.2.2 tree)
    nox -s eval -- --config cfg.toml the main job (arguments are passed to `mkb eval`)
    nox -s tasks -- audit            the task suite (list / generate / audit; audit needs torch)
    nox -s import -- SRC --out DIR   problem files / ONNX models -> task folders (`mkb tasks import`; torch)
    nox -s report -- RUN_DIR         the report of a run
    nox -s bundle -- RUN_DIR         one archive of a run for a reviewer, then validated (`mkb bundle`)
    nox -s reproduce -- BUNDLE       re-run a bundle here and print the verdict (`mkb reproduce`)
    nox -s bench                     speed benchmarks (ratios measured side by side)
    nox -s lint                      ruff

Each session keeps its virtualenv under .nox/ (reused) with the kit installed editable; `tests` and `tasks`
add the `tasks` extra (torch==2.13.0, CPU build).  Installs use no build isolation, so once a session's
venv exists it runs offline.
"""

from __future__ import annotations

import os

import nox

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = True


def _install(session: nox.Session, extras: str = "dev") -> None:
    # no build isolation: once the dependencies are in the venv, a rerun works offline (tests run without
    # network); torch comes from the tasks extra (torch==2.13.0, a CPU build)
    session.install("setuptools>=61")
    session.install("--no-build-isolation", "-e", f".[{extras}]")


@nox.session(reuse_venv=True)
def tests(session: nox.Session) -> None:
    """The test suite; extra arguments go to pytest.  Installs the tasks extra (torch) for the audit tests."""
    _install(session, "dev,tasks")
    session.run("pytest", "-q", "-ra", *session.posargs, env={"PYTHONDONTWRITEBYTECODE": "1"})


@nox.session(reuse_venv=True, default=False)
def eval(session: nox.Session) -> None:  # noqa: A001 - the session is called eval on purpose
    """`mkb eval`; pass `-- --config configs/default.toml`."""
    _install(session)
    args = session.posargs or ["--config", "configs/default.toml"]
    session.run("mkb", "eval", *args)


@nox.session(reuse_venv=True, default=False)
def check(session: nox.Session) -> None:
    """`mkb check` for one candidate; pass `-- --task ID --files A.cpp`."""
    _install(session)
    session.run("mkb", "check", *session.posargs)


@nox.session(reuse_venv=True, default=False)
def calibrate(session: nox.Session) -> None:
    """`mkb calibrate`: native method on every task of the split."""
    _install(session)
    session.run("mkb", "calibrate", *(session.posargs or ["--config", "configs/calibrate.toml"]))


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


@nox.session(reuse_venv=True, default=False)
def report(session: nox.Session) -> None:
    """`mkb report RUN_DIR [RUN_DIR ...]`."""
    _install(session)
    session.run("mkb", "report", *(session.posargs or ["runs/default"]))


@nox.session(reuse_venv=True, default=False)
def bundle(session: nox.Session) -> None:
    """`mkb bundle RUN_DIR [--out FILE]`, then `mkb validate` on the archive it wrote."""
    _install(session)
    args = session.posargs or ["runs/default"]
    out = args[args.index("--out") + 1] if "--out" in args else f"{args[0].rstrip('/')}/bundle.tar.gz"
    session.run("mkb", "bundle", *args)
    session.run("mkb", "validate", out)


@nox.session(reuse_venv=True, default=False)
def reproduce(session: nox.Session) -> None:
    """`mkb reproduce BUNDLE [--run-dir DIR] [overrides]`: exits 1 on a real difference."""
    _install(session)
    if not session.posargs:
        session.error("pass the bundle: nox -s reproduce -- BUNDLE [--run-dir DIR] [--mnn.source_dir DIR ...]")
    session.run("mkb", "reproduce", *session.posargs, env={k: v for k, v in os.environ.items() if k.startswith("MKB_")})


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
