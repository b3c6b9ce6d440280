"""ONNX models as sources: their input specs and sample inputs, and the ``model.py`` of such a task.

A given ONNX model has no ``get_inputs``: float inputs are drawn uniform in [-1, 1), integer inputs in
[0, 9] (an index-safe default for dimensions of at least 10; the indices of Gather, GatherElements and
ScatterElements in [0, s - 1] of the axis they index), bool inputs by a fair coin; every input must
have a static shape, or one made static on the command line (``--dim NAME=N``: :func:`fix_dims`).  Its ``model.py`` is KernelBench-format and runs the task's own ``model.onnx`` (next to
it) with ``onnx.reference`` — the reference *is* the graph; there is no PyTorch source to show.
"""

from __future__ import annotations

import numpy as np
import onnx

from kit.suite.importer.problem import ImportFailure
from kit.suite.importer.shapeinputs import bound_indices
from kit.suite.inputs import _draw
from kit.suite.spec import seeded_rng
from kit.suite.tasks import Task, TensorSpec

_ELEM = {onnx.TensorProto.FLOAT: "float32", onnx.TensorProto.INT32: "int32", onnx.TensorProto.INT64: "int64",
         onnx.TensorProto.BOOL: "bool"}


def dynamic_dims(path) -> set[str]:  # noqa: ANN001 - a Path
    """The named dynamic dimensions (dim_param) of the graph inputs of the ONNX model at ``path`` (empty for
    a file that does not load: the import says why)."""
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception:  # noqa: BLE001 - onnx raises several types; the import reports the file
        return set()
    return {d.dim_param for vi in model.graph.input for d in vi.type.tensor_type.shape.dim
            if d.dim_param and not d.HasField("dim_value")}


def fix_dims(model: onnx.ModelProto, dims: dict[str, int]) -> list[str]:
    """Give every dimension named in ``dims`` (dim_param -> length) of ``model``'s inputs, outputs and value
    infos that length (in place); one note per name the model has ("N: dynamic dimension fixed to 8 (--dim
    N=8)")."""
    used: set[str] = set()
    for vi in [*model.graph.input, *model.graph.output, *model.graph.value_info]:
        for d in vi.type.tensor_type.shape.dim:
            if d.dim_param in dims and not d.HasField("dim_value"):
                used.add(d.dim_param)
                d.dim_value = dims[d.dim_param]  # a oneof: clears the dim_param
    return [f"{n}: dynamic dimension fixed to {dims[n]} (--dim {n}={dims[n]})" for n in sorted(used)]


def graph_input_specs(model: onnx.ModelProto) -> list[TensorSpec]:
    """Specs of the graph inputs that are not initializers (default ranges, see the module docstring).

    Raises:
        ImportFailure: ``unsupported_input`` for a dynamic dimension or an unsupported element type.
    """
    inits = {i.name for i in model.graph.initializer}
    specs = []
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        if tt.elem_type not in _ELEM:
            raise ImportFailure("unsupported_input", f"input {vi.name} has element type "
                                                     f"{onnx.TensorProto.DataType.Name(tt.elem_type)}")
        dims = [d.dim_value if d.HasField("dim_value") else 0 for d in tt.shape.dim]
        if any(d <= 0 for d in dims):
            names = [d.dim_param or "?" if not d.HasField("dim_value") else str(d.dim_value) for d in tt.shape.dim]
            free = [d.dim_param for d in tt.shape.dim if d.dim_param and not d.HasField("dim_value")]
            how = f"fix it with --dim {free[0]}=N" if free else "an unnamed dimension: give the model static dims"
            raise ImportFailure("unsupported_input", f"input {vi.name} has a dynamic shape [{', '.join(names)}] "
                                                     f"({how})")
        dtype = _ELEM[tt.elem_type]
        if dtype == "bool":
            specs.append(TensorSpec(name=vi.name, shape=dims, dtype=dtype, distribution="bool", low=0, high=1))
        elif dtype in ("int32", "int64"):
            specs.append(TensorSpec(name=vi.name, shape=dims, dtype=dtype, distribution="integers", low=0, high=9))
        else:
            specs.append(TensorSpec(name=vi.name, shape=dims, dtype=dtype))
    return specs


def sample_feeds(model: onnx.ModelProto, seed: int = 0) -> tuple[list[TensorSpec], dict[str, np.ndarray]]:
    """(input specs, one seeded sample of inputs) of a given ONNX model."""
    specs = bound_indices(model, graph_input_specs(model))
    rng = seeded_rng(model.graph.name, seed)
    return specs, {s.name: _draw(s, rng) for s in specs}


_TEMPLATE = '''"""{category} / {id}: ONNX {op} (opset {opset}), imported from the ONNX model {file}.

The reference is the task's own model.onnx, run with onnx.reference (there is no PyTorch source).
"""

from pathlib import Path

import numpy as np
import torch
from torch import nn

_MODEL = Path(__file__).with_name("model.onnx")


class Model(nn.Module):
    """Runs model.onnx with onnx.reference.ReferenceEvaluator."""

    def __init__(self):
        super().__init__()
        from onnx.reference import ReferenceEvaluator

        self._ref = ReferenceEvaluator(str(_MODEL))

    def forward(self, {args}):
        """
        Args:
{in_doc}
        Returns:
{out_doc}
        """
        feeds = {{{feeds}}}
        outs = [torch.from_numpy(np.asarray(o)) for o in self._ref.run(None, feeds)]
        return outs[0] if len(outs) == 1 else tuple(outs)


def get_inputs():
    return [{draws}]


def get_init_inputs():
    return []
'''

_TORCH = {"float32": "torch.float32", "int32": "torch.int32", "int64": "torch.int64"}


def _draw_expr(s: TensorSpec) -> str:
    shape = "(" + ", ".join(str(d) for d in s.shape) + ("," if len(s.shape) == 1 else "") + ")"
    if s.dtype == "bool":
        return f"torch.randint(0, 2, {shape}).bool()"
    if s.dtype in ("int32", "int64"):
        return f"torch.randint({int(s.low)}, {int(s.high) + 1}, {shape}, dtype={_TORCH[s.dtype]})"
    return f"torch.rand({shape}) * {s.high - s.low!r} + {s.low!r}"


def onnx_model_py(task: Task) -> str:
    """The ``model.py`` text of a task imported from an ONNX model (see the module docstring)."""
    assert task.source is not None
    return _TEMPLATE.format(
        category=task.category, id=task.id, op=task.op_type, opset=task.opset, file=task.source.file,
        args=", ".join(s.name for s in task.inputs),
        in_doc="\n".join(f"            {s.name}: {s.dtype} {s.shape}" for s in task.inputs),
        out_doc="\n".join(f"            {s.name}: {s.dtype} {s.shape}" for s in task.outputs),
        feeds=", ".join(f"{s.name!r}: {s.name}.numpy()" for s in task.inputs),
        draws=", ".join(_draw_expr(s) for s in task.inputs))
