"""Compile the kit's runner (``runner/mkb_runner.cpp``, protocol in :mod:`kit.mnn.runner`) against an MNN tree's
public headers and a build directory's libraries, cached by a key of everything the binary depends on."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from kit.host import proc

#: the runner's C++ source, shipped inside the package (it includes the ``mkb_*.hpp`` headers beside it)
RUNNER_SOURCE = Path(__file__).with_name("runner") / "mkb_runner.cpp"
#: every file the runner is compiled from
#: the headers it includes, beside it
RUNNER_HEADERS = ("mkb_io.hpp", "mkb_guard.hpp", "mkb_fresh.hpp", "mkb_stamps.hpp", "mkb_lockdown.hpp")
RUNNER_FILES = (RUNNER_SOURCE, *(RUNNER_SOURCE.with_name(h) for h in RUNNER_HEADERS))
#: flags of the single compiler invocation (besides include/library paths)
CXX_FLAGS = ("-O2", "-std=c++17", "-pthread")


class RunnerBuildError(RuntimeError):
    """The runner did not compile or link; ``proc`` holds the compiler's output."""

    def __init__(self, message: str, result: proc.ProcResult | None = None):
        super().__init__(message)
        self.proc = result


def _libraries(build_dir: Path, static: bool = False) -> tuple[Path, ...]:
    libs = (build_dir / "libMNN.a",) if static else (build_dir / "libMNN.so", build_dir / "express" / "libMNN_Express.so")
    for lib in libs:
        if not lib.is_file():
            raise FileNotFoundError(
                f"{lib} not found: build the MNN targets MNN and MNN_Express in {build_dir} first"
            )
    return libs


#: link flags of a static runner around the static library: the whole archive (an undefined symbol of any of
#: its objects fails the link, as an executable's link does for a shared build) and no shared library at all
STATIC_FLAGS = ("-static", "-Wl,--whole-archive", "{lib}", "-Wl,--no-whole-archive")


def runner_key(src_root: Path, build_dir: Path, compiler: str = "g++", static: bool = False) -> str:
    """sha256 (hex) of everything the runner binary depends on: its sources, the public headers' path, the
    library paths, the compiler and the flags; a static runner also the static library's size and mtime (it is
    linked in: a rebuilt library needs a new runner)."""
    h = hashlib.sha256()
    for path in RUNNER_FILES:
        h.update(path.read_bytes())
    parts = [str(Path(src_root).resolve() / "include"), str(Path(build_dir).resolve()), compiler, *CXX_FLAGS]
    if static:
        st = (Path(build_dir) / "libMNN.a").stat()
        parts += [*STATIC_FLAGS, f"{st.st_size}:{st.st_mtime_ns}"]
    for part in parts:
        h.update(b"\0" + part.encode())
    return h.hexdigest()


def build_runner(
    src_root: Path, build_dir: Path, out: Path, timeout_s: float = 120.0, *, compiler: str = "g++",
    static: bool = False,
) -> Path:
    """Compile ``mkb_runner`` against ``src_root/include`` and ``build_dir``'s ``libMNN.so`` and
    ``express/libMNN_Express.so`` with one compiler invocation; the binary's RUNPATH names both library dirs.
    ``static``: link ``build_dir/libMNN.a`` whole into a ``-static`` binary instead (a cross build's runner).

    Skipped when ``out`` exists and its key file (``out`` + ``.key``, see :func:`runner_key`) matches.
    The binary is written to a temporary name and renamed, so concurrent builders never see half a file.

    Returns:
        ``out``.
    Raises:
        FileNotFoundError: the headers or the libraries are missing.
        RunnerBuildError: the compiler failed or timed out (message and ``.proc`` carry its output).
    """
    src_root, build_dir, out = Path(src_root).resolve(), Path(build_dir).resolve(), Path(out)
    include = src_root / "include"
    if not (include / "MNN" / "expr" / "Module.hpp").is_file():
        raise FileNotFoundError(
            f"{include}/MNN/expr/Module.hpp not found: {src_root} is not an MNN source tree"
        )
    libs = _libraries(build_dir, static)
    key = runner_key(src_root, build_dir, compiler, static)
    key_file = out.with_name(out.name + ".key")
    if out.is_file() and key_file.is_file() and key_file.read_text().strip() == key:
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    if static:  # compiled once, linked per library: 6.3 s against 0.6 s for the aarch64 runner here
        obj = _runner_object(include, out.parent, compiler, timeout_s)
        _compile(compiler, [str(obj), *(f.format(lib=libs[0]) for f in STATIC_FLAGS)], out, timeout_s)
    else:
        _compile(compiler, [f"-I{include}", str(RUNNER_SOURCE),
                            f"-L{build_dir}", f"-L{build_dir / 'express'}", "-lMNN_Express", "-lMNN",
                            "-Wl,--enable-new-dtags", f"-Wl,-rpath,{build_dir}:{build_dir / 'express'}"],
                 out, timeout_s)  # fmt: skip
    key_file.write_text(key + "\n")
    return out


def _runner_object(include: Path, where: Path, compiler: str, timeout_s: float) -> Path:
    """The runner's object file in ``where``, compiled unless one of the same sources, headers' path, compiler
    and flags is there (its name carries their digest).

    Raises:
        RunnerBuildError: the compiler failed."""
    h = hashlib.sha256(b"".join(p.read_bytes() for p in RUNNER_FILES))
    h.update("\0".join([str(include), compiler, *CXX_FLAGS]).encode())
    obj = where / f".mkb_runner-{h.hexdigest()[:16]}.o"
    if not obj.is_file():
        _compile(compiler, ["-c", f"-I{include}", str(RUNNER_SOURCE)], obj, timeout_s)
    return obj


def _compile(compiler: str, args: list[str], out: Path, timeout_s: float) -> None:
    """``compiler CXX_FLAGS args -o out``, written to a temporary name and renamed (concurrent builders never
    see half a file).

    Raises:
        RunnerBuildError: the compiler is missing, failed or timed out (``.proc`` carries its output)."""
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        result = proc.run([compiler, *CXX_FLAGS, *args, "-o", str(tmp)], cwd=out.parent, timeout_s=timeout_s)
    except FileNotFoundError as e:
        raise RunnerBuildError(f"compiler {compiler!r} not found") from e
    if not result.ok or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        what = "timed out" if result.timed_out else f"failed (exit {result.returncode})"
        raise RunnerBuildError(f"building mkb_runner {what}:\n{result.output}", result)
    os.replace(tmp, out)
