"""A small TOML writer for ``task.toml`` (the schema of :class:`kit.tasks.Task`; no third-party writer)."""

from __future__ import annotations

import json
from typing import Any

from kit.suite.spec import TaskDef


def _v(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = repr(value)
        return text if any(ch in text for ch in ".en") else text + ".0"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_v(x) for x in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def dumps_task(td: TaskDef, *, split: str, description: str, shapes: dict[str, list[int]], target) -> str:
    """``task.toml`` text for ``td``; ``target`` is a :class:`kit.suite.mnn_targets.Target`."""
    lines = [
        f"id = {_v(td.id)}",
        f"category = {_v(td.category)}",
        f"op_type = {_v(td.op)}",
        "opset = 20",
        f"mechanism = {_v(target.mechanism)}",
        f"split = {_v(split)}",
        f"description = {_v(description)}",
        f"mnn_op_types = {_v(list(target.op_types))}",
        "",
        "[tolerance]",
        f"atol = {_v(float(td.atol))}",
        f"rtol = {_v(float(td.rtol))}",
        "",
        "[mnn]",
        f"files = {_v(list(target.files))}",
        f"new_files = {_v(list(target.new_files))}",
        f"keep_symbols = {_v(list(target.keep_symbols))}",
    ]
    for i in td.inputs:
        lines += ["", "[[inputs]]", f"name = {_v(i.name)}", f"shape = {_v(list(i.shape))}", f"dtype = {_v(i.dtype)}",
                  f"distribution = {_v(i.dist if i.dtype != 'bool' else 'bool')}",
                  f"low = {_v(float(i.low))}", f"high = {_v(float(i.high))}"]
    for o in td.outputs:
        lines += ["", "[[outputs]]", f"name = {_v(o.name)}", f"shape = {_v(shapes[o.name])}", f"dtype = {_v(o.dtype)}"]
    return "\n".join(lines) + "\n"
