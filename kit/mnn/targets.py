"""What a build builds: the ninja targets a job needs, one rule for native (shared) and cross (static) builds.

A build makes only what the kit runs afterwards, never the engine's other executables (MNN 3.2.2's default
target links 23 of them; measured on the 2-core VM: a candidate's build was 1.5-2.1 s of a 2.0 s median job,
most of it those links):

* the **libraries** the runner loads (shared: ``libMNN.so`` and ``libMNN_Express.so``) or links in (static:
  ``libMNN.a``, Express inside);
* the **runner**, where the engine's build makes it (the fixture engine's ``mkb_runner``); MNN's runner is the
  kit's own (:mod:`kit.mnn.runner_build`), linked by the kit: natively once per native baseline, for a static
  target once per build;
* the **converter** (``MNNConvert``, with ``libMNNConvertDeps.so``) only when the job needs it rebuilt: the
  native baseline's build, a candidate that changes a converter source (:func:`changes_converter`: the
  composite tasks' ``tools/converter/`` files), and the first build after such a candidate, whose converter
  still holds the previous candidate's code (:data:`CONVERTER_STATE`).  Any other candidate is converted by
  the workspace's pristine converter, which loads the candidate's ``libMNN.so`` at run time (its geometry and
  kernels are the library's; ``LD_LIBRARY_PATH``).  A cross build has no converter (the build host's converts).

A missing symbol (a registration function or a member the candidate declares and never defines) would fail
only when an executable links the library, and the kit builds none; so a shared library refuses undefined
symbols itself (:data:`NO_UNDEFINED`, checked on MNN 3.2.2's native build: its three shared libraries link with
it), and a static library's runner link (``--whole-archive``) is that check for a cross build.
"""

from __future__ import annotations

from collections.abc import Iterable

from kit.host.target import Target

#: CMake argument of a shared build: every shared library linked with no undefined symbol left
NO_UNDEFINED = "-DCMAKE_SHARED_LINKER_FLAGS=-Wl,--no-undefined"
#: where an engine's converter sources live (MNN-relative; the fixture engine has the same layout)
CONVERTER_DIRS = ("tools/converter/",)
#: workspace state key: its converter was last built from a candidate's converter source (rebuild it next)
CONVERTER_STATE = "converter_from_candidate"

#: per engine and link kind (static?), the library targets the runner needs
_LIBRARIES = {
    ("mnn", False): ("MNN", "MNN_Express"),
    ("mnn", True): ("MNN",),
    ("fixture", False): ("MNN",),
    ("fixture", True): ("MNN",),
}
#: the runner target of an engine whose build makes it (MNN: none, the kit links its own)
_RUNNER = {"mnn": (), "fixture": ("mkb_runner",)}
#: the converter target of each engine
_CONVERTER = {"mnn": ("MNNConvert",), "fixture": ("MNNConvert",)}


def build_targets(engine: str, target: Target, *, converter: bool, runner: bool) -> list[str]:
    """The ninja targets of a build of ``engine`` for ``target``: its libraries, with ``runner`` the engine's
    runner target (if it has one), with ``converter`` the converter (never for a cross target: not configured).

    Raises:
        KeyError: an engine the kit does not know."""
    out = list(_LIBRARIES[(engine, target.static)])
    if runner:
        out += _RUNNER[engine]
    if converter and not target.cross:
        out += _CONVERTER[engine]
    return out


def native_targets(engine: str, target: Target) -> list[str]:
    """The targets of the native baseline's build (and a fresh workspace's first build): libraries, runner,
    converter (natively)."""
    return build_targets(engine, target, converter=True, runner=True)


def candidate_targets(engine: str, target: Target, changes_converter: bool, converter_stale: bool) -> list[str]:
    """The targets of a candidate's build: the libraries; the engine's runner for a static target (its link
    is the library's symbol check); the converter when the candidate changes it or the workspace's converter
    is a previous candidate's (``converter_stale``)."""
    return build_targets(engine, target, converter=changes_converter or converter_stale, runner=target.static)


def changes_converter(paths: Iterable[str]) -> bool:
    """Whether any of ``paths`` (MNN-relative: a candidate's replaced and added files) is a converter source."""
    return any(p.startswith(CONVERTER_DIRS) for p in paths)
