#!/usr/bin/env python3
"""Write (or check) the fixture tasks' ``model.onnx`` files from their ``task.toml``.

Each model is a single ONNX node (opset 20) whose inputs and outputs are those of the task.toml
(names, shapes, dtypes); the node's attributes are fixed below per task id.

Usage:  python make_tasks.py [--check]
    --check  regenerate in memory and exit 1 if a committed model.onnx differs (nothing is written).
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import onnx
from onnx import TensorProto, helper

TASKS_DIR = Path(__file__).resolve().parent / "tasks"
OPSET = 20
IR_VERSION = 10

_DTYPES = {
    "float32": TensorProto.FLOAT,
    "int32": TensorProto.INT32,
    "int64": TensorProto.INT64,
    "bool": TensorProto.BOOL,
}

#: task id → node attributes
ATTRIBUTES: dict[str, dict[str, object]] = {
    "fx_argmax": {"axis": 1, "keepdims": 0},
    "fx_exp": {},
    "fx_transpose": {"perm": [0, 2, 3, 1]},
    "fx_sub": {},
}


def build_model(task_toml: Path) -> onnx.ModelProto:
    """The one-node model of the task described by ``task_toml``.

    Raises:
        KeyError: the task id has no entry in :data:`ATTRIBUTES`.
    """
    spec = tomllib.loads(task_toml.read_text(encoding="utf-8"))
    attrs = ATTRIBUTES[spec["id"]]

    def value_info(t: dict) -> onnx.ValueInfoProto:
        return helper.make_tensor_value_info(t["name"], _DTYPES[t.get("dtype", "float32")], t["shape"])

    node = helper.make_node(
        spec["op_type"],
        [t["name"] for t in spec["inputs"]],
        [t["name"] for t in spec["outputs"]],
        name=f"{spec['id']}_node",
        **attrs,
    )
    graph = helper.make_graph(
        [node], spec["id"], [value_info(t) for t in spec["inputs"]], [value_info(t) for t in spec["outputs"]]
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="mkb-fixture",
        ir_version=IR_VERSION,
    )
    onnx.checker.check_model(model, full_check=True)
    return model


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for toml in sorted(TASKS_DIR.glob("*/*/task.toml")):
        data = build_model(toml).SerializeToString()
        target = toml.parent / "model.onnx"
        if check:
            if not target.is_file() or target.read_bytes() != data:
                stale.append(str(target))
        else:
            target.write_bytes(data)
            print(f"wrote {target}")
    if stale:
        print("stale or missing:\n  " + "\n  ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
