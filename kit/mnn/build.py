"""Configure a workspace once, build it incrementally with ninja and ccache, parse compiler diagnostics.

Configure: ``cmake -G Ninja <src> -DCMAKE_BUILD_TYPE=Release`` plus the engine's flags (for MNN: the
converter, trimmed to its ONNX front end by :mod:`kit.mnn.converter`, and tools on; a cross build: the toolchain file and a static runtime, :mod:`kit.mnn.toolchain`)
and ``mnn.cmake_args``; rerun (``cmake .``) only when the workspace says so (a file was added or removed).
A shared build's libraries refuse undefined symbols (:data:`kit.mnn.targets.NO_UNDEFINED`); a workspace
configured with other arguments than today's (another ``mnn.cmake_args``, an older kit) is configured afresh.
Build: ``ninja`` of the targets the job needs (:mod:`kit.mnn.targets`: the libraries, the converter when
it changed, the engine's runner), never the engine's other executables.  ccache uses ``<cache>/ccache`` with
the workspace as ``CCACHE_BASEDIR`` so hits survive other workspace paths.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path

from kit.host import proc
from kit.host.sandbox import Confinement, Policy, interpreter_paths
from kit.host.target import Target
from kit.mnn import buildfail, buildwatch, converter, runner_build, targets, toolchain
from kit.mnn.workspace import Workspace
from kit.results.records import Diagnostic

ENGINE_CMAKE_ARGS = {
    "mnn": ["-DMNN_BUILD_CONVERTER=ON", "-DMNN_BUILD_TOOLS=ON"],
    "fixture": [],
}

# gcc/clang: path:line:col: severity: message
_DIAG = re.compile(
    r"^(?P<file>[^:\n][^:\n]*):(?P<line>\d+):(?:(?P<col>\d+):)? (?P<sev>fatal error|error|warning|note): (?P<msg>.*)$"
)
# GNU ld: "/usr/bin/ld: obj.o: in function `f':" / "file.cpp:(.text+0x1): undefined reference to `x'"
_LD = re.compile(r"^(?P<file>[^:\n]+):\((?P<sect>[^)]*)\): (?P<msg>.*)$")
_LD2 = re.compile(r"^(?:/\S*/)?ld(?:\.\w+)?: (?P<msg>(?!warning).*)$")


@dataclass(frozen=True)
class BuildOptions:
    """How workspaces (and the native baseline) are configured and built.

    ``engine``: ``mnn`` or ``fixture`` (the kit's test engine: its own CMake flags); ``cmake_args``: extra
    CMake arguments; ``jobs``: ninja's ``-j``; ``stall_timeout_s``: seconds a build of the whole tree (the native
    baseline, a fresh workspace's first build) may go without finishing a step (0: no such limit; then
    ``timeout_s`` bounds its total, the only limit of such a build before), ``candidate_timeout_s``: seconds
    for a candidate's build; ``ccache``: compile through ccache when it is
    installed, its cache under ``cache_dir / "ccache"``; ``policy``: how the build's commands are confined
    (they compile candidate code: a memory cap for the compiler, no network); ``target``: what it builds for
    (a cross target: :mod:`kit.mnn.toolchain`)."""

    engine: str
    cache_dir: Path
    cmake_args: tuple[str, ...] = ()
    jobs: int = 1
    timeout_s: float = 1200.0
    ccache: bool = True
    stall_timeout_s: float = 600.0
    candidate_timeout_s: float = 300.0
    policy: Policy = Policy()
    target: Target = Target()

    def host(self) -> BuildOptions:
        """These options for a native build on this host (a cross target's converter)."""
        return replace(self, target=Target(self.target.host_arch, self.target.host_arch))

    def confine(self, ws: Workspace) -> Confinement:
        """A build's confinement in ``ws``: it reads the workspace's sources (and this Python, for the tree's
        scripts; a cross build's toolchain file; the converter's trim), writes its build directory and the
        ccache directory (made when missing)."""
        tools = toolchain.build_reads(self.target)  # the toolchain file, or an Android NDK
        tools += converter.build_reads(self.engine, self.target.cross)  # its CMake include and source
        return self.policy.confine(ro=[ws.src, *interpreter_paths(), *tools], rw=[ws.build, self.cache_dir / "ccache"],
                                   step=f"build in {ws.root}")


@dataclass(frozen=True)
class BuildResult:
    """Outcome of one build.  ``wall_s`` in seconds; ``diagnostics`` errors first.  ``timed_out`` also when
    the stall limit stopped it (``stalled``); ``steps_done`` / ``steps_total``: the commands it finished and
    planned (0 / 0 when not watched; a total of 0 with steps done: the dry run failed); ``output``: what ninja
    printed (head and tail of 2 MiB)."""

    ok: bool
    timed_out: bool
    wall_s: float
    diagnostics: list[Diagnostic] = field(default_factory=list)
    log_tail: str = ""
    configure_s: float = 0.0
    stalled: bool = False
    steps_done: int = 0
    steps_total: int = 0
    output: str = field(default="", repr=False)
    #: the signal that ended ninja from outside the build (None: it exited, or the kit stopped it)
    signal: int | None = None


def build_env(cache_dir: Path, ws_root: Path) -> dict[str, str]:
    """The build's environment: ccache's directory under ``cache_dir``, the workspace as its base dir."""
    extra = {
        "CCACHE_DIR": str(cache_dir / "ccache"),
        "CCACHE_BASEDIR": str(ws_root),
        "CCACHE_NOHASHDIR": "1",
        "CCACHE_MAXSIZE": "10G",
        # the converter's precompiled headers (kit.mnn.converter): without these ccache refuses to cache a
        # compile that uses one, and a second workspace would compile the converter afresh
        "CCACHE_SLOPPINESS": "pch_defines,time_macros",
    }
    return proc.base_env(extra)


def cmake_command(opts: BuildOptions, src: Path) -> list[str]:
    """The first configure's command line for the tree at ``src`` (a native MNN build: the converter trimmed to
    the ONNX front end, :mod:`kit.mnn.converter`)."""
    args = ["cmake", "-G", "Ninja", str(src), "-DCMAKE_BUILD_TYPE=Release"]
    if opts.target.cross:
        args += toolchain.cross_cmake_args(opts.engine, opts.target)
    else:
        args += ENGINE_CMAKE_ARGS[opts.engine]
        if opts.engine == "mnn":
            args += converter.cmake_args()
    if not opts.target.static:
        args.append(targets.NO_UNDEFINED)
    if opts.ccache and proc.which("ccache"):
        args += ["-DCMAKE_C_COMPILER_LAUNCHER=ccache", "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
    return args + list(opts.cmake_args)


def link_runner(ws: Workspace, opts: BuildOptions, out: Path) -> Path:
    """The runner of ``ws``'s build, at ``out``: for MNN the kit's runner compiled against it (a static target's
    links the workspace's ``libMNN.a`` in: one runner per build), for the fixture engine the one its build made
    (copied).

    Raises:
        FileNotFoundError: the fixture engine's runner, or MNN's libraries, were not built.
        kit.mnn.runner_build.RunnerBuildError: the kit's runner did not compile or link (for a static build: an
            undefined symbol of the workspace's library: the candidate's fault)."""
    if opts.engine == "mnn":
        return runner_build.build_runner(ws.src, ws.build, out, timeout_s=300, compiler=toolchain.cxx(opts.target),
                                         static=opts.target.static)
    built = ws.build / "mkb_runner"
    if not built.is_file():
        raise FileNotFoundError(f"{built}: the fixture engine's runner was not built")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    shutil.copy2(built, tmp)
    os.replace(tmp, out)
    return out


class ConfigureError(buildfail.CauseError):
    """CMake failed on a tree the kit controls.  Its message: :attr:`cause`, one line naming cmake's first
    error and what to do (:func:`kit.mnn.buildfail.failure_line`), then where cmake's whole output is kept
    (:attr:`log`, a file of the workspace; None when it could not be written)."""

    OUTPUT = "cmake's whole output"


#: workspace state key: digest of the command line its build directory was configured with
_CONFIGURED = "configured_with"


def configure(ws: Workspace, opts: BuildOptions, timeout_s: float = 600.0) -> float:
    """Configure ``ws.build`` if it is new, was configured with another command line (its ``CMakeCache.txt``
    removed first, so no old value survives; the objects stay, and ninja rebuilds only the steps whose commands
    changed), or a re-configure is pending; return seconds spent.

    Raises:
        ConfigureError: cmake failed (its output kept in ``<workspace>/configure-failed.log``).
    """
    ws.build.mkdir(exist_ok=True)
    argv = cmake_command(opts, ws.src)
    digest = hashlib.sha256(json.dumps(argv).encode()).hexdigest()[:16]
    state = ws.state()
    fresh = not (ws.build / "build.ninja").is_file() or state.get(_CONFIGURED) != digest
    if not fresh and not state.get("needs_configure", False):
        return 0.0
    if fresh:
        (ws.build / "CMakeCache.txt").unlink(missing_ok=True)
    res = proc.run(argv if fresh else ["cmake", "."], cwd=ws.build, env=build_env(opts.cache_dir, ws.root),
                   timeout_s=timeout_s, confine=opts.confine(ws))
    if not res.ok:
        what = f"cmake (in {ws.build})"
        cause = (f"{what} timed out after {timeout_s:g} s" if res.timed_out
                 else buildfail.failure_line(what, res.output, opts.cache_dir, ws.src, res.returncode))
        raise ConfigureError(cause, buildfail.keep_log(ws.root / "configure-failed.log", res.output))
    # a new configure may change any step: the tree counts as built whole again only after a whole build
    ws.set_state(needs_configure=False, built_whole=False, **{_CONFIGURED: digest})
    return res.wall_s


def build(
    ws: Workspace, opts: BuildOptions, timeout_s: float | None = None, goals: list[str] | None = None,
    progress: buildwatch.ProgressFn | None = None, stall_s: float | None = None,
) -> BuildResult:
    """Run ninja in ``ws.build`` for the targets ``goals`` (default: the native baseline's,
    :func:`kit.mnn.targets.native_targets`).
    Returns a :class:`BuildResult` (never raises for compile errors).

    ``progress``: called as ``progress(done, total, elapsed_s)`` (steps finished and planned, seconds) from a
    background thread while ninja runs (:mod:`kit.mnn.buildwatch`; a dry run first, 0.03 s for MNN); for the
    native build.  ``stall_s``: stop the build once no step finished for that many seconds (running time; a
    timing phase's pause not counted).  Limits: ``timeout_s`` seconds in all when given; else none with
    ``stall_s`` (a build that makes progress runs to its end), ``opts.timeout_s`` without it.  Without
    ``progress`` and ``stall_s`` the build runs unwatched.

    Raises:
        ConfigureError: the re-configure before the build failed (a harness problem).
    """
    configure_s = configure(ws, opts)
    env = build_env(opts.cache_dir, ws.root)
    goals = goals if goals is not None else targets.native_targets(opts.engine, opts.target)
    argv = ["ninja", "-j", str(opts.jobs), "-k", "0", *goals]
    watch = buildwatch.watch(ws.build, env, goals, progress, stall_s) if progress or stall_s else None
    stalls = watch is not None and stall_s is not None  # no watch (no dry run): the fixed total instead
    limit = timeout_s if timeout_s is not None else (None if stalls else opts.timeout_s)
    ok = False
    try:
        res = proc.run(argv, cwd=ws.build, env=env, timeout_s=limit, log_limit=2 << 20, confine=opts.confine(ws),
                       stop_when=watch.stalled if stalls and watch is not None else None)
        ok = res.ok
    finally:
        counted = watch.stop(ok) if watch is not None else 0
    total = watch.total if watch is not None else 0
    # a build that succeeded ran all it had to (a step a restat rule pruned is never logged)
    done = total if ok and total else (min(counted, total) if total else counted)
    return BuildResult(
        ok=res.ok, timed_out=res.timed_out or res.stopped, wall_s=res.wall_s,
        diagnostics=parse_diagnostics(res.output, ws.src), log_tail="\n".join(res.output.splitlines()[-60:]),
        configure_s=configure_s, stalled=res.stopped, steps_done=done, steps_total=total, output=res.output,
        signal=None if res.timed_out or res.stopped else res.signal,
    )


def _rel(path: str, src: Path) -> str:
    p = path.strip()
    for base in (str(src) + "/", str(src.resolve()) + "/"):
        if p.startswith(base):
            return p[len(base) :]
    while p.startswith("../"):
        p = p[3:]
    if p.startswith("src/"):
        p = p[4:]
    return p


def parse_diagnostics(log: str, src: Path, limit: int = 200) -> list[Diagnostic]:
    """Compiler and linker messages from a build log, errors first, at most ``limit``.

    File paths are made relative to the tree root ``src``.  Each diagnostic keeps up to 6 following
    context lines (source excerpt and caret).
    """
    lines = log.splitlines()
    out: list[Diagnostic] = []
    seen: set[tuple] = set()
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _DIAG.match(line)
        if m:
            ctx = []
            j = i + 1
            while j < len(lines) and len(ctx) < 6 and (lines[j].startswith(" ") or lines[j].startswith("\t")):
                ctx.append(lines[j])
                j += 1
            key = (m["file"], m["line"], m["col"], m["sev"], m["msg"])
            if key not in seen:
                seen.add(key)
                out.append(
                    Diagnostic(
                        file=_rel(m["file"], src),
                        line=int(m["line"]),
                        column=int(m["col"]) if m["col"] else None,
                        severity=m["sev"],
                        message=m["msg"].strip(),
                        context="\n".join(ctx),
                    )
                )
            i = j
            continue
        m2 = _LD.match(line)
        if m2 and ("undefined reference" in m2["msg"] or "multiple definition" in m2["msg"]):
            key = ("ld", m2["msg"])
            if key not in seen:
                seen.add(key)
                out.append(Diagnostic(file=_rel(m2["file"], src), severity="linker", message=m2["msg"].strip()))
        else:
            m3 = _LD2.match(line)
            if m3 and not line.startswith("collect2"):
                key = ("ld", m3["msg"])
                if key not in seen and ("undefined" in m3["msg"] or "error" in m3["msg"] or "cannot" in m3["msg"]):
                    seen.add(key)
                    out.append(Diagnostic(file="", severity="linker", message=m3["msg"].strip()))
        i += 1
    order = {"fatal error": 0, "error": 0, "linker": 1, "warning": 2, "note": 3}
    out.sort(key=lambda d: order.get(d.severity, 4))
    return out[:limit]
