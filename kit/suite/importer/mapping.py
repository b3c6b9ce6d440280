"""Where an imported task's op lives in MNN: the built-in suite's mapping (:mod:`kit.suite.mnn_targets`),
adjusted by an observation of the native conversion, and for ops the suite does not have, the converter
file found in the configured MNN tree.

Observation: the task's ``model.onnx`` converted (the 3.2.2 ``MNNConvert`` of the configured build when
given, else the PyPI wheel's converter) and run with a per-op callback, exactly as the built-in suite was
probed (:func:`kit.suite.probe.probe_task`).  An op native MNN cannot convert still becomes a task: composite,
the whole model timed (``["*"]``), a candidate may add converter files.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import cache
from pathlib import Path

from kit.suite.mnn_targets import EXTRA, EXTRA_NEW, OP_TARGETS, OpSite, target_from
from kit.suite.tasks import Task


@cache
def op_categories() -> dict[str, str]:
    """ONNX op -> the built-in suite's (most common) category for it."""
    from kit.suite.builtin import all_defs

    by_op: dict[str, Counter] = {}
    for d in all_defs():
        by_op.setdefault(d.op, Counter())[d.category] += 1
    return {op: c.most_common(1)[0][0] for op, c in by_op.items()}


def converter_file(op: str, mnn_root: Path | None) -> str | None:
    """MNN-relative path of the converter file handling ONNX ``op`` in the tree at ``mnn_root``: an
    ``onnxextra/Onnx*.cpp`` naming ``"op"``, else an ``onnx/*Onnx.cpp`` with ``REGISTER_CONVERTER(X, op)``;
    None when there is none (or no tree)."""
    if mnn_root is None:
        return None
    extra = mnn_root / EXTRA
    for f in sorted(extra.glob("Onnx*.cpp")):
        if f'"{op}"' in f.read_text(encoding="utf-8", errors="replace"):
            return EXTRA + f.name
    reg = re.compile(r"REGISTER_CONVERTER\(\s*\w+\s*,\s*" + re.escape(op) + r"\s*\)")
    for f in sorted((mnn_root / "tools/converter/source/onnx").glob("*.cpp")):
        if reg.search(f.read_text(encoding="utf-8", errors="replace")):
            return str(f.relative_to(mnn_root))
    return None


def observe(task: Task, converter: Path | None, work: Path) -> dict:
    """One observation of the task's native conversion and run: ``{"graph", "runtime"}`` or ``{"error"}``."""
    from kit.suite.probe import probe_task

    return probe_task(task, converter, work)


def target(op: str, obs: dict, mnn_root: Path | None) -> tuple[OpSite, str]:
    """(target, note) for an imported ``op`` node; the note says how it was mapped and whether native MNN
    converts it."""
    native = "native MNN converts it" if obs.get("graph") else f"native MNN cannot convert it: {obs.get('error', '?')}"
    if op in OP_TARGETS:
        return target_from(op, obs), f"the built-in suite's mapping of {op}; {native}"
    conv = converter_file(op, mnn_root)
    if conv is None:
        how = "no converter for it in the MNN tree" if mnn_root is not None else "no MNN tree given to look it up"
        return OpSite("composite", ("*",), (), EXTRA_NEW), f"{op} is not in the built-in mapping; {how}; {native}"
    return OpSite("composite", ("*",), (conv,), EXTRA_NEW), f"{op}: converter {conv} (found in the tree); {native}"
