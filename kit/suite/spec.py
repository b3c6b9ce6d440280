"""Building blocks of the suite definition: one :class:`TaskDef` per task, rendered to files.

A :class:`TaskDef` is plain data: the ONNX node (op, attributes, graph inputs, constant initializers),
the PyTorch reference (``__init__`` arguments and code, ``forward`` code) and the tolerance.  The
renderers here turn it into ``model.onnx`` (exactly one node, opset 20, built with ``onnx.helper``) and
``model.py`` (KernelBench format).  Everything is deterministic: constants come from generators seeded
with the task id.
"""

from __future__ import annotations

import hashlib
import textwrap
from dataclasses import dataclass, field
from typing import Any

import numpy as np

OPSET = 20
#: why the built-in suite's default tolerance is atol = rtol = 1e-4
DEFAULT_TOLERANCE_REASON = ("the suite's default for one float32 op: PyTorch and native MNN agree with ONNX Runtime "
                            "within it on the task's inputs (mkb tasks audit)")
IR_VERSION = 9  # the IR version that introduced opset 20 (onnx 1.15)

_NP = {"float32": np.float32, "int32": np.int32, "int64": np.int64, "bool": np.bool_}
_TORCH = {"float32": "torch.float32", "int32": "torch.int32", "int64": "torch.int64", "bool": "torch.bool"}


@dataclass(frozen=True)
class In:
    """A graph input (a task input): shape, dtype and the distribution inputs are drawn from.

    ``dist`` is one of kit.suite.tasks.TensorSpec's distributions: uniform [low, high), normal (mean low,
    std high), integers [low, high] inclusive, bool, positive.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str = "float32"
    dist: str = "uniform"
    low: float = -1.0
    high: float = 1.0

    def describe(self) -> str:
        shape = list(self.shape)
        if self.dist == "bool" or self.dtype == "bool":
            values = "random booleans (p=0.5)"
        elif self.dist == "integers" or self.dtype in ("int32", "int64"):
            values = f"random integers in [{int(self.low)}, {int(self.high)}]"
        elif self.dist == "normal":
            values = f"normal with mean {self.low:g} and std {self.high:g}"
        else:
            values = f"uniform in [{self.low:g}, {self.high:g})"
        return f"{self.name}: {self.dtype} tensor of shape {shape}, {values}"

    def torch_expr(self) -> str:
        """A PyTorch expression drawing a tensor like this input (used by get_inputs())."""
        shape = ", ".join(str(d) for d in self.shape) + ("," if len(self.shape) == 1 else "")
        if self.dist == "bool" or self.dtype == "bool":
            return f"torch.randint(0, 2, ({shape})).bool()"
        if self.dist == "integers" or self.dtype in ("int32", "int64"):
            return f"torch.randint({int(self.low)}, {int(self.high) + 1}, ({shape}), dtype={_TORCH[self.dtype]})"
        if self.dist == "normal":
            base = f"torch.randn({shape}) * {self.high!r}"
            return base if self.low == 0 else f"{base} + {self.low!r}"
        span = self.high - self.low
        if self.low == 0:
            return f"torch.rand({shape}) * {span!r}"
        sign = "-" if self.low < 0 else "+"
        return f"torch.rand({shape}) * {span!r} {sign} {abs(self.low)!r}"


@dataclass(frozen=True)
class Out:
    """A graph output; its shape is found by running the model once at generation time."""

    name: str
    dtype: str = "float32"


@dataclass(frozen=True)
class Const:
    """A constant initializer of the node (weights, or attribute tensors such as TopK's k)."""

    name: str
    value: np.ndarray
    #: a short human description for the docstring ("weight of the convolution", ...)
    what: str = ""


@dataclass
class TaskDef:
    """One task of the suite (see the module docstring).

    ``node_inputs`` lists the node's input names in ONNX order ("" for a skipped optional input); by
    default the graph inputs followed by the constants.  ``init_args`` are ``(name, value)`` pairs:
    the ``Model.__init__`` parameters and the values ``get_init_inputs()`` returns.  ``init_code`` and
    ``forward`` are Python source (indented by the renderer); ``forward`` sees the inputs by name.
    A PyTorch parameter or persistent buffer must carry the name (state_dict key) of the ONNX
    initializer holding its value; the audit loads those values before comparing.
    """

    id: str
    category: str
    op: str
    summary: str
    inputs: list[In]
    outputs: list[Out]
    forward: str
    attrs: dict[str, Any] = field(default_factory=dict)
    consts: list[Const] = field(default_factory=list)
    node_inputs: list[str] | None = None
    init_args: list[tuple[str, Any]] = field(default_factory=list)
    init_code: str = ""
    note: str = ""
    #: module-level helper code placed before ``class Model`` in model.py
    extra_code: str = ""
    atol: float = 1e-4
    rtol: float = 1e-4
    #: how a tolerance other than the default was set ("" : :data:`DEFAULT_TOLERANCE_REASON` or the note's words)
    tol_reason: str = ""
    #: "derived" when atol/rtol come from :mod:`kit.suite.tolerance`'s record (else set by this definition)
    tol_method: str = "hand"
    #: the accumulation length K of a derived tolerance (0: not derived)
    tol_k: int = 0

    def tolerance_reason(self) -> str:
        """Why the task's tolerance is what it is (``[tolerance] reason`` of task.toml)."""
        if self.tol_reason:
            return self.tol_reason
        if (self.atol, self.rtol) == (1e-4, 1e-4):
            return DEFAULT_TOLERANCE_REASON
        if self.note:  # the definitions state a widened tolerance's cause in the note
            return self.note
        return ("widened by hand for this op's accumulation length or its library functions; the audit checks "
                "PyTorch and native MNN against ONNX Runtime within it")

    def node_input_names(self) -> list[str]:
        if self.node_inputs is not None:
            return list(self.node_inputs)
        return [i.name for i in self.inputs] + [c.name for c in self.consts]


def seeded_rng(*key: object) -> np.random.Generator:
    """A numpy generator seeded by sha256 of ``key`` (deterministic across runs and machines)."""
    digest = hashlib.sha256("/".join(str(k) for k in key).encode()).digest()
    return np.random.Generator(np.random.PCG64(int.from_bytes(digest[:16], "little")))


def uniform_const(key: str, shape: tuple[int, ...], bound: float, low: float | None = None) -> np.ndarray:
    """float32 array uniform in [low, bound) (low defaults to -bound), seeded by ``key``."""
    lo = -bound if low is None else low
    return seeded_rng(key).uniform(lo, bound, size=shape).astype(np.float32)


def i64(values: Any) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


def f32(values: Any) -> np.ndarray:
    return np.asarray(values, dtype=np.float32)


# ---------------------------------------------------------------------------------------------- ONNX
def build_onnx(td: TaskDef, output_shapes: dict[str, list[int]] | None = None):  # -> onnx.ModelProto
    """The single-node ONNX model of ``td`` (outputs without shapes when ``output_shapes`` is None)."""
    import onnx
    from onnx import helper, numpy_helper

    def elem(dtype: str) -> int:
        return helper.np_dtype_to_tensor_dtype(np.dtype(_NP[dtype]))

    node = helper.make_node(
        td.op, td.node_input_names(), [o.name for o in td.outputs], name=f"{td.op}_0", **td.attrs
    )
    graph_inputs = [helper.make_tensor_value_info(i.name, elem(i.dtype), list(i.shape)) for i in td.inputs]
    graph_outputs = [
        helper.make_tensor_value_info(o.name, elem(o.dtype), None if output_shapes is None else output_shapes[o.name])
        for o in td.outputs
    ]
    inits = [numpy_helper.from_array(np.ascontiguousarray(c.value), c.name) for c in td.consts]
    graph = helper.make_graph([node], td.id, graph_inputs, graph_outputs, initializer=inits)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="mobilekernelbench-kit"
    )
    model.ir_version = IR_VERSION
    if output_shapes is not None:
        onnx.checker.check_model(model, full_check=True)
    return model


def probe_outputs(td: TaskDef) -> dict[str, list[int]]:
    """Run the shapeless model once with onnxruntime on zero-free random inputs; output name → shape."""
    import onnxruntime as ort

    model = build_onnx(td)
    rng = seeded_rng(td.id, "probe")
    feeds: dict[str, np.ndarray] = {}
    for i in td.inputs:
        if i.dtype == "bool":
            feeds[i.name] = rng.integers(0, 2, size=i.shape).astype(np.bool_)
        elif i.dtype in ("int32", "int64"):
            feeds[i.name] = rng.integers(int(i.low), int(i.high) + 1, size=i.shape).astype(_NP[i.dtype])
        else:
            lo, hi = (max(i.low, 1e-3), i.high) if i.dist == "positive" else (i.low, i.high)
            if i.dist == "normal":
                feeds[i.name] = rng.normal(i.low, i.high, size=i.shape).astype(np.float32)
            else:
                feeds[i.name] = rng.uniform(lo, hi, size=i.shape).astype(np.float32)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    outs = sess.run([o.name for o in td.outputs], feeds)
    shapes = {}
    for o, arr in zip(td.outputs, outs):
        if arr.dtype != np.dtype(_NP[o.dtype]):
            raise ValueError(f"task {td.id}: output {o.name} is {arr.dtype}, declared {o.dtype}")
        shapes[o.name] = list(arr.shape)
    return shapes


# ---------------------------------------------------------------------------------------------- model.py
_HEADER = '''"""{title}

{body}
"""

import torch
from torch import nn
'''


def _fmt_value(v: Any) -> str:
    if isinstance(v, list):  # immutable defaults in signatures
        v = tuple(v)
    return repr(v)


def _module_head(td: TaskDef, description: str) -> str:
    """The module docstring (title, ``description`` wrapped at 100) and the torch imports of model.py,
    then ``td.extra_code`` when there is any; ``F`` is imported only where the code uses ``F.``."""
    title = f"{td.category} / {td.id}: ONNX {td.op} (opset {OPSET})."
    body = textwrap.fill(description, 100)
    head = _HEADER.format(title=title, body=body)
    if "F." in td.forward + td.init_code + td.extra_code:
        head += "from torch.nn import functional as F\n"
    if td.extra_code.strip():
        head += td.extra_code.rstrip() + "\n"
    return head


def _const_doc(td: TaskDef) -> str:
    """The class docstring's list of the constants that have a description (``Const.what``); "" if none."""
    named = [c for c in td.consts if c.what]
    if not named:
        return ""
    return "\n\n    Constant tensors of model.onnx (a parameter or buffer of the same name takes its value):\n" + "\n".join(
        f"        {c.name}: {c.value.dtype} {list(c.value.shape)}, {c.what}" for c in named
    )


def _init_body(td: TaskDef) -> str:
    """The body of ``Model.__init__``: ``super().__init__()``, one attribute per init argument, then
    ``td.init_code`` indented by 8."""
    init_lines = ["        super().__init__()"]
    for n, _ in td.init_args:
        init_lines.append(f"        self.{n} = {n}")
    if td.init_code.strip():
        init_lines.append(textwrap.indent(textwrap.dedent(td.init_code).strip("\n"), " " * 8))
    return "\n".join(init_lines)


def _model_class(td: TaskDef, output_shapes: dict[str, list[int]]) -> str:
    """``class Model``: the summary docstring, ``__init__`` and ``forward`` (Args/Returns give every input's
    and output's dtype and shape; ``output_shapes`` maps output name → shape)."""
    in_doc = "\n".join(f"            {i.describe()}" for i in td.inputs)
    out_doc = "\n".join(f"            {o.name}: {o.dtype} tensor of shape {output_shapes[o.name]}" for o in td.outputs)
    sig = ", ".join(f"{n}={_fmt_value(v)}" for n, v in td.init_args)
    fwd_args = ", ".join(f"{i.name}: torch.Tensor" for i in td.inputs)
    ret = "torch.Tensor" if len(td.outputs) == 1 else "tuple[" + ", ".join("torch.Tensor" for _ in td.outputs) + "]"
    summary = textwrap.fill(td.summary, 100, subsequent_indent="    ")
    return f'''

class Model(nn.Module):
    """{summary}{_const_doc(td)}
    """

    def __init__(self{", " + sig if sig else ""}):
{_init_body(td)}

    def forward(self, {fwd_args}) -> {ret}:
        """
        Args:
{in_doc}
        Returns:
{out_doc}
        """
{textwrap.indent(textwrap.dedent(td.forward).strip(chr(10)), " " * 8)}
'''


def _module_tail(td: TaskDef) -> str:
    """The init-argument constants (upper-case names), ``get_inputs()`` (:meth:`In.torch_expr` per input)
    and ``get_init_inputs()``."""
    consts = "\n".join(f"{n.upper()} = {_fmt_value(v)}" for n, v in td.init_args)
    gi = "\n".join(f"    {i.name} = {i.torch_expr()}" for i in td.inputs)
    names = ", ".join(i.name for i in td.inputs)
    return f'''
{chr(10) + consts + chr(10) + chr(10) if consts else ""}
def get_inputs():
{gi}
    return [{names}]


def get_init_inputs():
    return [{", ".join(n.upper() for n, _ in td.init_args)}]
'''


def render_model_py(td: TaskDef, output_shapes: dict[str, list[int]], description: str) -> str:
    """KernelBench-style ``model.py`` text for ``td`` (importable only where torch is installed)."""
    text = _module_head(td, description) + _model_class(td, output_shapes) + _module_tail(td)
    # collapse accidental triple blank lines
    while "\n\n\n\n" in text:
        text = text.replace("\n\n\n\n", "\n\n\n")
    return text
