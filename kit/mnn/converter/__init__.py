"""How the kit builds MNN's converter: the ONNX front end only, at its own optimization level.

The kit converts ONNX models and nothing else, and the converter is never timed (it writes the ``.mnn``
model; the op runs in ``libMNN.so``).  MNN 3.2.2 builds ``MNNConvert`` with its Caffe, TensorFlow and TFLite
front ends and their optimizer passes, all at ``-O3``: about 200 of the 757 compile steps of a native
build with the converter, and the converter's remaining steps at ``-O3`` take longer than they need.  The kit's CMake include (``trim.cmake``, read through ``CMAKE_PROJECT_MNN_INCLUDE``; the
tree is never changed) takes those front ends out (``frontends_absent.cpp`` gives their three entry points,
which fail with a message) and compiles the converter's targets and the vendored protobuf at
:data:`CONVERTER_OPT`.  The libraries the runner loads, ``MNN`` and ``MNN_Express``, keep MNN's own flags
(``CMAKE_BUILD_TYPE=Release``: ``-O3``), so what is timed is built exactly as MNN builds it.

Measured (MNN 3.2.2, 2 cores, empty ccache): 757 → 558 steps; see docs/runs.md for the build times.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
#: the CMake include that trims the converter build
TRIM_CMAKE = HERE / "trim.cmake"
#: the kit's source with the entry points of the front ends it leaves out
FRONTENDS_ABSENT = HERE / "frontends_absent.cpp"
#: the optimization level of the converter's targets (after MNN's -O3 on their command lines: the last wins)
CONVERTER_OPT = "-O0"

#: compile the converter's passes, ONNX front end and common sources with a precompiled header of their common
#: includes (parsing is most of an -O0 compile: about half of each file's CPU time here)
CONVERTER_PCH = True

#: what the native build's libraries and converter are compiled with, in words (records and provenance)
LIBRARY_FLAGS = "MNN, MNN_Express: MNN's own (CMAKE_BUILD_TYPE=Release, -O3)"
CONVERTER_FLAGS = f"MNNConvert: ONNX front end only, {CONVERTER_OPT}{', precompiled headers' if CONVERTER_PCH else ''}"


def build_flags(engine: str, cross: bool) -> str:
    """How a native build of ``engine`` is compiled, in words (the native baseline's ``meta.json``, every
    record's ``build_flags``, provenance): the timed libraries' flags and, where built, the converter's."""
    if engine != "mnn":
        return f"{engine} engine: its own CMake flags (CMAKE_BUILD_TYPE=Release)"
    if cross:
        return f"{LIBRARY_FLAGS.replace('MNN, MNN_Express', 'MNN (static)')}; no converter (the build host's)"
    return f"{LIBRARY_FLAGS}; {CONVERTER_FLAGS}"


def build_reads(engine: str, cross: bool) -> list[Path]:
    """What a sandboxed build of ``engine`` must see of the kit for :func:`cmake_args` (configure reads the
    include, ninja compiles the source): this folder for a native MNN build, nothing otherwise."""
    return [HERE] if engine == "mnn" and not cross else []


def cmake_args() -> list[str]:
    """The CMake arguments of a build with the trimmed converter (files named by absolute path)."""
    return [
        f"-DCMAKE_PROJECT_MNN_INCLUDE={TRIM_CMAKE}",
        f"-DMKB_CONVERTER_STUBS={FRONTENDS_ABSENT}",
        f"-DMKB_CONVERTER_OPT={CONVERTER_OPT}",
        f"-DMKB_CONVERTER_PCH={'ON' if CONVERTER_PCH else 'OFF'}",
    ]


def file_defines() -> tuple[str, ...]:
    """The CMake variables of :func:`cmake_args` whose values are kit files (keyed by content, not path)."""
    return ("CMAKE_PROJECT_MNN_INCLUDE", "MKB_CONVERTER_STUBS")
