"""The native baseline: the pristine tree built once per (tree digest, engine, compiler, CMake args).

Its shared libraries are copied into ``<cache>/native/<key>/lib`` together with its converter and the kit's
runner, so the same runner runs against native or candidate libraries just by ``LD_LIBRARY_PATH``
(MNN's executables use RUNPATH, which ``LD_LIBRARY_PATH`` overrides).  Native models (the task's ONNX
converted by the native converter) are cached per task.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from kit.host import proc
from kit.host.progress import BuildProgress, duration_text
from kit.host.sandbox import SandboxError
from kit.host.shipping import Bundle, pack, runtime_libs
from kit.mnn import build as mbuild
from kit.mnn import buildfail, converter, targets, toolchain
from kit.mnn.source import Pristine
from kit.mnn.workspace import Workspace

#: the engine's name in the native build's progress line
_ENGINE_NAMES = {"mnn": "MNN"}

log = logging.getLogger("kit")

#: workspace state key: every target of the tree was built since the build directory was last configured
BUILT_WHOLE = "built_whole"


class NativeBuildError(buildfail.CauseError):
    """The pristine tree did not build: nothing can be evaluated.  Its message: :attr:`cause`, one line saying
    why and what to do (:mod:`kit.mnn.buildfail`: the first real error of the build's output, a missing program,
    a timeout at step k/n), then where the build's whole output is kept (:attr:`log`, a file of the workspace;
    None when there is none).  The records of a run whose setup failed carry the cause
    (:func:`kit.job.record.setup_failed_record`)."""

    OUTPUT = "the build's whole output"


@dataclass(frozen=True)
class Native:
    """Paths of the cached native build."""

    key: str
    dir: Path

    @property
    def lib_dir(self) -> Path:
        return self.dir / "lib"

    @property
    def converter(self) -> Path:
        return self.dir / "bin" / "MNNConvert"

    @property
    def runner(self) -> Path:
        return self.dir / "bin" / "mkb_runner"

    @property
    def models(self) -> Path:
        return self.dir / "models"


def compiler_id(env: dict[str, str] | None = None, cxx: str = "c++") -> str:
    """First line of ``<cxx> --version`` (part of the native cache key)."""
    res = proc.run([cxx, "--version"], env=env, timeout_s=30)
    return res.stdout.splitlines()[0] if res.ok and res.stdout else "unknown"


def runner_source_digest() -> str:
    from kit.mnn import runner as mrunner

    src = Path(mrunner.__file__).parent / "runner"
    h = hashlib.sha256()
    for p in sorted(src.rglob("*")):
        if p.is_file():
            h.update(p.name.encode() + p.read_bytes())
    return h.hexdigest()


def native_key(opts: mbuild.BuildOptions, pristine: Pristine) -> str:
    """sha256 (hex, 16 chars) of what the native build depends on: tree digest, engine, compiler, CMake
    arguments and (for MNN) the runner's sources; for a cross target also its architecture.  A CMake argument
    naming a file of the kit (a toolchain file, the converter's trim, :data:`_FILE_DEFINES`) counts by the
    file's content, not its path: the kit's install place does not change the build."""
    t = opts.target
    cmake = [_by_content(a) for a in mbuild.cmake_command(opts, Path("SRC"))[3:]]
    parts = {
        "tree": pristine.digest,
        "engine": opts.engine,
        "compiler": compiler_id(cxx=toolchain.cxx(t)),
        "cmake": cmake,
        "runner": runner_source_digest() if opts.engine == "mnn" else "",
    }
    if t.cross:
        parts["target"] = {"arch": t.arch, "fp16": t.fp16, "static": t.static}
        if t.ndk is not None:  # the NDK's revision, API level and ABI (its toolchain file: by content, above)
            parts["target"]["ndk"] = t.ndk.describe()
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


#: CMake variables whose values are files of the kit: keyed by their content, not their path
_FILE_DEFINES = ("CMAKE_TOOLCHAIN_FILE", *converter.file_defines())


def _by_content(arg: str) -> str:
    """``arg``, or for a ``-DNAME=PATH`` of :data:`_FILE_DEFINES` ``-DNAME=sha256:<16 hex of the file>``."""
    name, sep, value = arg.partition("=")
    if not sep or name.removeprefix("-D") not in _FILE_DEFINES:
        return arg
    return f"{name}=sha256:{hashlib.sha256(Path(value).read_bytes()).hexdigest()[:16]}"


def workspace_lib_dir(ws: Workspace) -> Path:
    """A directory of symlinks to every shared library of ``ws.build`` (one ``LD_LIBRARY_PATH`` entry), relative
    to it: a cache moved or copied elsewhere (``cp -a ~/.cache/mkb``, a HOME mounted at another path) would keep
    absolute links into the first workspace's build, and every candidate would be verified and timed with that
    tree's (native) libraries, a crashing or wrong kernel ``ok``.  Links that do not lead into ``ws.build`` are
    made again."""
    libs = ws.root / "lib"
    first = libs / "libMNN.so"
    build = ws.build.resolve()
    if first.is_symlink() and first.resolve().is_relative_to(build):  # the links follow rebuilds
        return libs
    libs.mkdir(exist_ok=True)
    for old in libs.iterdir():
        if old.is_symlink() and not old.resolve().is_relative_to(build):
            old.unlink()
    for so in ws.build.rglob("*.so*"):
        if so.is_file() and "CMakeFiles" not in so.parts:
            link = libs / so.name
            if not link.is_symlink():
                os.symlink(os.path.relpath(so, libs), link)
    return libs


def check_build_tools(opts: mbuild.BuildOptions, what: str) -> None:
    """Refuse to start ``what`` (a build) when a program it needs is not installed (:func:`kit.mnn.buildfail.
    missing_tool`: cmake, ninja, the compiler), before anything is configured or locked for long.

    Raises:
        NativeBuildError: names the programs, the PATH searched and the Debian packages."""
    if missing := buildfail.missing_tool(opts.engine, opts.target, what):
        raise NativeBuildError(missing)


def build_pristine(ws: Workspace, opts: mbuild.BuildOptions, label: str) -> mbuild.BuildResult:
    """Build ``ws`` (which must hold the pristine sources), its steps shown as ``label``
    (:class:`kit.host.progress.BuildProgress`): the native build, and a fresh workspace's first build (the whole
    tree, ~10 min for MNN on 2 cores, 13 from a cold ccache; up to date: a no-op of ~0.3 s).  It runs as long
    as steps keep finishing: stopped when none finished in ``opts.stall_timeout_s`` seconds (0: after
    ``opts.timeout_s`` seconds in all).  Returns the build's result (``wall_s``, ``steps_done``).

    A workspace a killed job left changed is restored first (and said in the log).

    Raises:
        NativeBuildError: the pristine tree fails to configure or build, or timed out: one line naming the
            first real error (the whole output is kept in ``<workspace>/build-failed.log`` or
            ``configure-failed.log``).  Its callers check the programs it needs first (:func:`check_build_tools`
            in :func:`ensure_native` and :func:`kit.job.worker.setup_worker`)."""
    _repaired(ws)
    ws.set_state(**{BUILT_WHOLE: False})  # until this build succeeds
    stall_s = opts.stall_timeout_s or None
    try:
        with BuildProgress(label) as progress:
            res = mbuild.build(ws, opts, progress=progress, stall_s=stall_s)
    except mbuild.ConfigureError as exc:
        raise NativeBuildError(f"{label}: {exc.cause}", exc.log) from exc
    except SandboxError as exc:  # a folder the build writes cannot be made (e.g. the ccache path is a file)
        raise NativeBuildError(f"{label}: {exc}; make it a writable folder or point mnn.cache_dir elsewhere") from exc
    if res.timed_out:
        cause = buildfail.timeout_line(label, res.wall_s, res.steps_done, res.steps_total, res.stalled,
                                       stall_s if res.stalled and stall_s else opts.timeout_s)
    elif not res.ok and res.signal is not None and not buildfail.first_error(res.output, ws.src):
        cause = buildfail.killed_line(label, res.signal, res.steps_done, res.steps_total)
    elif not res.ok:
        cause = buildfail.failure_line(label, res.output, opts.cache_dir, ws.src)
    else:
        # its converter (rebuilt with the rest) is the pristine one; every target is built
        ws.set_state(**{targets.CONVERTER_STATE: False, BUILT_WHOLE: True})
        if res.steps_done:  # (an up-to-date tree: nothing was built, nothing to say)
            log.info("%s: %d steps in %s", label, res.steps_done, duration_text(res.wall_s + res.configure_s))
        return res
    raise NativeBuildError(cause, buildfail.keep_log(ws.root / "build-failed.log", res.output))


def _repaired(ws: Workspace) -> None:
    """:meth:`Workspace.check_and_repair`, saying in the log what a killed job left changed."""
    repaired = ws.check_and_repair()
    if repaired:  # a job killed in the middle left them; restored from the pristine tree
        log.warning("workspace %s: restored %d file(s) a killed job left changed: %s", ws.root, len(repaired),
                    ", ".join(repaired[:5]))


def ready_workspace(ws: Workspace, opts: mbuild.BuildOptions, label: str,
                    hold: Callable[[], AbstractContextManager[object]] = nullcontext) -> bool:
    """A worker's workspace made ready for its first job: its sources repaired to the pristine tree's, and
    built whole (:func:`build_pristine`) unless it was so built since its last configure (its state's
    :data:`BUILT_WHOLE`; ``configure`` clears it).  What the jobs since changed and restored is then left to the
    next candidate's build, as between the jobs of one worker (ninja rebuilds those steps: a link and the restored
    objects, from ccache), instead of a build of its own at every start (~2-5 s of a one-candidate check).
    The build runs inside ``hold()`` (the node's shared hold; not taken when nothing is built).  Returns
    whether it built.

    Raises:
        NativeBuildError: as :func:`build_pristine`."""
    if ws.state().get(BUILT_WHOLE) and not ws.state().get("needs_configure", False):
        _repaired(ws)
        return False
    with hold():
        build_pristine(ws, opts, label)
    return True


def ensure_native(opts: mbuild.BuildOptions, pristine: Pristine, ws: Workspace) -> Native:
    """Build the pristine tree in ``ws`` (which must be clean) and save the baseline, unless cached.  Its
    ``meta.json`` (:func:`native_meta`) records the build's wall seconds (``build_s``, configure included) and
    the steps it ran (``build_steps``).

    Raises:
        NativeBuildError: a program the build needs is missing, the pristine tree fails to configure or build,
            or an expected output is missing.
    """
    check_build_tools(opts, native_label(opts))  # first: the key runs the compiler
    key = native_key(opts, pristine)
    native = Native(key, opts.cache_dir / "native" / key)
    if (native.dir / "done").is_file():
        return native
    t = opts.target
    built = build_pristine(ws, opts, native_label(opts))
    staging = native.dir.with_name(native.dir.name + ".partial")
    if staging.exists():
        shutil.rmtree(staging)
    (staging / "lib").mkdir(parents=True)
    (staging / "bin").mkdir()
    (staging / "models").mkdir()
    if not t.static:  # a static build's runtime is linked into its runner; its converter is the host's
        _save_shared(ws, staging)
    try:
        mbuild.link_runner(ws, opts, staging / "bin" / "mkb_runner")
    except FileNotFoundError as exc:
        raise NativeBuildError(str(exc)) from exc
    # build_s / build_steps: what the first run on a machine costs (CI prints them); configure included
    meta = {"key": key, "tree_digest": pristine.digest, "engine": opts.engine,
            "compiler": compiler_id(cxx=toolchain.cxx(t)), "arch": t.arch, "static": t.static,
            "build_flags": converter.build_flags(opts.engine, t.cross),
            "build_s": round(built.wall_s + built.configure_s, 1), "build_steps": built.steps_done}
    (staging / "meta.json").write_text(json.dumps(meta, indent=1))
    (staging / "done").write_text("ok\n")
    if native.dir.exists():
        shutil.rmtree(native.dir)
    os.replace(staging, native.dir)
    return native


def native_label(opts: mbuild.BuildOptions) -> str:
    """The native build's name in its progress lines and errors: ``native MNN build`` (``... for aarch64``)."""
    t = opts.target
    return f"native {_ENGINE_NAMES.get(opts.engine, opts.engine)} build" + (f" for {t.arch}" if t.cross else "")


def _save_shared(ws: Workspace, staging: Path) -> None:
    """Copy the shared libraries and the converter of ``ws.build`` into ``staging`` (``lib/``, ``bin/``).

    Raises:
        NativeBuildError: the converter was not built."""
    for so in ws.build.rglob("*.so*"):
        if so.is_file() and "CMakeFiles" not in so.parts:
            shutil.copy2(so, staging / "lib" / so.name)
    conv = ws.build / "MNNConvert"
    if not conv.is_file():
        raise NativeBuildError(f"{conv}: the converter was not built")
    shutil.copy2(conv, staging / "bin" / "MNNConvert")


def native_meta(native: Native) -> dict:
    path = native.dir / "meta.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def native_bundle(native: Native) -> Bundle:
    """The native libraries and the runner as a :class:`~kit.host.shipping.Bundle` (``lib/*``, ``bin/mkb_runner``),
    for a timing node that has no MNN build of its own."""
    return pack(runtime_libs(native.runner, native.lib_dir) | {"bin/mkb_runner": native.runner})


def install_shipped(cache_dir: Path, key: str, bundle: Bundle, arch: str | None = None, how: str = "natively") -> Path:
    """Write a shipped native baseline to ``cache_dir/shipped/<key>`` (once per node and key; atomic rename)
    and return that directory (``lib/``, ``bin/mkb_runner``).

    Kept apart from ``<cache>/native`` because it has no converter: a build on this node never takes it
    for a full native build.  ``arch``: the architecture this node runs ``how`` (default: its own, natively;
    an x86_64 node that emulates an aarch64 target: ``aarch64``, ``under qemu-aarch64-static``).

    Raises:
        kit.host.shipping.ArtefactError: a file of the bundle is not machine code for ``arch`` (names the file).
    """
    if arch is None:
        bundle.check_runs_here(f"the native baseline {key}")
    else:
        bundle.check_machine(arch, f"the native baseline {key}", how)
    dest = cache_dir / "shipped" / key
    if (dest / "done").is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{key}.partial.", dir=dest.parent))
    bundle.write(staging)
    (staging / "done").write_text("ok\n")
    try:
        os.replace(staging, dest)
    except OSError:  # another worker on this node installed it first
        shutil.rmtree(staging, ignore_errors=True)
        if not (dest / "done").is_file():
            raise
    return dest
