"""Where each task's op lives in MNN 3.2.2: mechanism, runtime op types, replaceable files, kept symbols.

The runtime op types were determined empirically (see ``observed.toml``): each ``model.onnx`` converted
with the MNN converter (``--keepInputFormat=1``) and run with a per-op callback.  Rules:

* ``composite`` (the ONNX converter rewrites the op into several ops, or cannot convert it):
  ``mnn_op_types = ["*"]`` (the whole model is the op) unless listed explicitly; the first file is the
  converter's ``onnxextra/Onnx*.cpp``; ``new_files`` allows new converter files.
* ``atomic`` (one CPU Execution) and ``geometric`` (a GeometryComputer lowers the op to Raster/While/...):
  the observed runtime types, minus ``Raster`` when that Raster only comes from the NCHW<->NC4HW4
  layout conversions (``ConvertTensor``) around the op.
* ``keep_symbols`` lists the public symbols of the replaced files that other MNN files use (found by
  grepping the 3.2.2 tree for their headers); ``Class`` means the class and its used members must stay.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from kit.suite.spec import TaskDef

#: written by ``python -m kit.suite.probe`` (do not edit): ``converter`` and ``runtime`` (how), ``tasks``
OBSERVED_TOML = Path(__file__).with_name("observed.toml")
PROBE: dict = tomllib.loads(OBSERVED_TOML.read_text(encoding="utf-8"))
#: task id -> {"graph": op types of the converted graph, "runtime": executed op types} or {"error": why not}
OBSERVED: dict[str, dict[str, list[str] | str]] = PROBE["tasks"]

CPU = "source/backend/cpu/"
GEO = "source/geometry/"
EXTRA = "tools/converter/source/optimizer/onnxextra/"
EXTRA_NEW = (EXTRA + "Onnx*.cpp",)


@dataclass(frozen=True)
class OpSite:
    mechanism: str
    op_types: tuple[str, ...]
    files: tuple[str, ...]
    new_files: tuple[str, ...] = ()
    keep_symbols: tuple[str, ...] = ()


def _cpu(name: str) -> tuple[str, str]:
    return (CPU + name + ".hpp", CPU + name + ".cpp")


_UNARY_KEEP = ("CPUUnary::selectForFloat", "CPUUnary::selectForInt8")  # compute/CommonOptFunction.cpp, CPURaster.cpp
_BINARY_KEEP = ("CPUBinary::selectForFloat", "CPUBinary::selectForInt")  # idem
_RELU_KEEP = ("CPURelu::CPURelu(Backend*, float)",)  # CPUBinary.cpp creates a CPURelu for fused activations
_POOL_KEEP = ("poolingMax", "poolingAvg", "poolingMaxWithRedice", "pooling_max_pad", "poolingAvgPad")  # templates
_MATMUL_KEEP = ("CPUMatMul::CPUMatMul(Backend*, bool, bool, bool, bool)", "CPUMatMul::execute")  # CPURaster, GRU
_CAST_KEEP = ("CPUCastCreator::cast", "CPUCastCreator::FlOAT_TO_INT8", "CPUCastCreator::INT8_TO_FlOAT")

UNARY = OpSite("atomic", ("UnaryOp",), _cpu("CPUUnary"), keep_symbols=_UNARY_KEEP)
BINARY = OpSite("atomic", ("BinaryOp",), _cpu("CPUBinary"), keep_symbols=_BINARY_KEEP)
BINARY_BCAST = OpSite("geometric", ("BinaryOp", "While", "Raster"), _cpu("CPUBinary") + (GEO + "GeometryBinary.cpp",),
                      keep_symbols=_BINARY_KEEP)


def _geo(*files: str, types=("Raster",)) -> OpSite:
    return OpSite("geometric", types, tuple(GEO + f for f in files))


def _comp(conv_file: str, *more: str, types=("*",), keep=()) -> OpSite:
    return OpSite("composite", types, (EXTRA + conv_file,) + tuple(more), EXTRA_NEW, keep)


#: ONNX op -> default target
OP_TARGETS: dict[str, OpSite] = {
    **{op: UNARY for op in ("Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil", "Round", "Sign",
                            "Erf", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Tanh", "Asinh",
                            "Acosh", "Atanh", "Sigmoid")},
    **{op: BINARY for op in ("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mod", "Equal", "Greater", "Less",
                             "GreaterOrEqual", "LessOrEqual", "And", "Or", "Xor")},
    "Relu": OpSite("atomic", ("ReLU",), _cpu("CPURelu"), keep_symbols=_RELU_KEEP),
    "LeakyRelu": OpSite("atomic", ("ReLU",), _cpu("CPURelu"), keep_symbols=_RELU_KEEP),
    "PRelu": OpSite("atomic", ("PReLU",), _cpu("CPURelu"), keep_symbols=_RELU_KEEP),
    "Softmax": OpSite("atomic", ("Softmax",), _cpu("CPUSoftmax"), keep_symbols=("CPUSoftmax",)),
    "HardSigmoid": _comp("OnnxHardSigmoid.cpp"),
    "Celu": _comp("OnnxPrelu.cpp"),
    "BatchNormalization": OpSite("atomic", ("Scale",), _cpu("CPUScale")),
    "LayerNormalization": OpSite("atomic", ("LayerNorm",), _cpu("CPULayerNorm") + (GEO + "GeometryLayernorm.cpp",)),
    "InstanceNormalization": _comp("OnnxBatchNormMerge.cpp", *_cpu("CPULayerNorm"), *_cpu("CPUScale"),
                                   types=("LayerNorm", "Scale")),
    "MaxPool": OpSite("atomic", ("Pooling",), _cpu("CPUPool"), keep_symbols=_POOL_KEEP),
    "AveragePool": OpSite("atomic", ("Pooling",), _cpu("CPUPool"), keep_symbols=_POOL_KEEP),
    "GlobalAveragePool": OpSite("atomic", ("Pooling",), _cpu("CPUPool"), keep_symbols=_POOL_KEEP),
    "GlobalMaxPool": OpSite("atomic", ("Pooling",), _cpu("CPUPool"), keep_symbols=_POOL_KEEP),
    "Conv": OpSite("atomic", ("Convolution",),
                   (CPU + "compute/ConvolutionFloatFactory.cpp", CPU + "compute/ConvolutionFloatFactory.h"),
                   keep_symbols=("ConvolutionFloatFactory::create",)),
    "ConvTranspose": OpSite("atomic", ("Deconvolution",), _cpu("CPUDeconvolution"),
                            keep_symbols=("CPUDeconvolutionBasic",)),
    "MatMul": OpSite("atomic", ("MatMul",), _cpu("CPUMatMul"), keep_symbols=_MATMUL_KEEP),
    "Gemm": _comp("OnnxGemm.cpp"),
    "Einsum": _comp("OnnxEinsum.cpp"),
    "Det": OpSite("atomic", ("Det",), _cpu("CPUDet")),
    **{op: OpSite("atomic", ("Reduction",), _cpu("CPUReduction"), keep_symbols=("CPUReductionCreator::create",))
       for op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd")},
    **{op: _comp("OnnxReduceL2.cpp") for op in ("ReduceL2", "ReduceSumSquare", "ReduceLogSumExp")},
    "ArgMax": OpSite("atomic", ("ArgMax",), _cpu("CPUArgMax")),
    "ArgMin": OpSite("atomic", ("ArgMin",), _cpu("CPUArgMax")),
    "Reshape": _geo("GeometryReshape.cpp"),
    "Transpose": _geo("GeometryPermute.cpp"),
    "Concat": _geo("GeometryConcat.cpp"),
    "Slice": _geo("GeometryStridedSlice.cpp"),
    "Split": _geo("GeometrySlice.cpp"),
    "Tile": _geo("GeometryTile.cpp"),
    "Expand": _geo("GeometryBroadcastTo.cpp"),
    "Pad": _geo("GeometryCrop.cpp"),
    "DepthToSpace": _geo("GeometryDepthToSpace.cpp"),
    "SpaceToDepth": _geo("GeometryDepthToSpace.cpp"),
    "Gather": _geo("GeometryGather.cpp", types=("*",)),
    "GatherElements": _geo("GeometryGather.cpp", types=("*",)),
    "GatherND": _geo("GeometryGather.cpp", types=("*",)),
    "ScatterND": _geo("GeometryScatter.cpp", types=("*",)),
    "CumSum": _geo("GeometryCumSum.cpp", types=("*",)),
    "Resize": OpSite("atomic", ("Interp",), _cpu("CPUInterp")),
    "Cast": OpSite("atomic", ("Cast",), _cpu("CPUCast"), keep_symbols=_CAST_KEEP),
    "TopK": OpSite("atomic", ("TopKV2",), _cpu("CPUTopKV2")),
    "Trilu": _comp("OnnxPrelu.cpp"),
    "Not": _comp("OnnxNot.cpp"),
    "BitwiseXor": OpSite("composite", ("*",), (), EXTRA_NEW),
    "Where": OpSite("atomic", ("Select",), _cpu("CPUSelect")),
    "RNN": _comp("OnnxLSTMMerge.cpp", GEO + "GeometryLSTM.cpp"),
    "LSTM": _comp("OnnxLSTMMerge.cpp", GEO + "GeometryLSTM.cpp"),
    "STFT": OpSite("atomic", ("Stft",), _cpu("CPUStft")),
    "RoiAlign": OpSite("atomic", ("ROIAlign",), _cpu("CPUROIAlign"), keep_symbols=("CPUROIAlign",)),
}

#: task id -> target, where the converter treats that task differently from its op's default
TASK_TARGETS: dict[str, OpSite] = {}

#: converter file of each op whose conversion may expand into several MNN ops (ONNX name -> path)
CONVERTER_FILES: dict[str, str] = {
    "Conv": EXTRA + "OnnxConvolutionMerge.cpp",
    "ConvTranspose": EXTRA + "OnnxConvolutionMerge.cpp",
    "LayerNormalization": EXTRA + "OnnxBatchNormMerge.cpp",
    "BatchNormalization": EXTRA + "OnnxBatchNormMerge.cpp",
    "PRelu": EXTRA + "OnnxPrelu.cpp",
    "MaxPool": EXTRA + "OnnxPooling.cpp",
    "AveragePool": EXTRA + "OnnxPooling.cpp",
    "GlobalAveragePool": EXTRA + "OnnxPooling.cpp",
    "GlobalMaxPool": EXTRA + "OnnxPooling.cpp",
    "Softmax": EXTRA + "OnnxSoftmax.cpp",
    "TopK": EXTRA + "OnnxTopK.cpp",
    "Resize": EXTRA + "OnnxUpsample.cpp",
    "STFT": EXTRA + "OnnxSTFT.cpp",
}

#: graph op types that do not count as extra compute when deciding whether a conversion is composite
_PLUMBING = {"Const", "ConvertTensor", "Input", "Unsqueeze", "Squeeze", "Reshape", "Shape", "Rank"}


def derive(op: str, t: OpSite, obs: dict) -> OpSite:
    """Adjust the op default ``t`` of ``op`` to what the converter really produced: ``obs`` is one observation
    (``{"graph": [...], "runtime": [...]}`` as in ``observed.toml``; ``{}`` when none)."""
    graph = [g for g in obs.get("graph", []) if g not in _PLUMBING]
    runtime = set(obs.get("runtime", []))
    if t.mechanism != "atomic" or not graph:
        return t
    if len(set(graph)) > 1 and op in CONVERTER_FILES:
        # one ONNX node became several compute ops (grouped conv split, 3-D conv via Im2Col, ...)
        return OpSite("composite", ("*",), (CONVERTER_FILES[op],) + t.files, EXTRA_NEW, t.keep_symbols)
    if op == "Conv" and "ConvolutionDepthwise" in runtime:
        # CPUConvolutionDepthwise.hpp is included by compute/ConvolutionFloatFactory.cpp
        return OpSite("atomic", ("ConvolutionDepthwise",), _cpu("CPUConvolutionDepthwise"),
                      keep_symbols=("CPUConvolutionDepthwise",))
    if t is BINARY and runtime & {"While", "Raster"}:
        return BINARY_BCAST
    if op == "Where" and "Raster" in runtime:
        return OpSite("geometric", t.op_types, t.files + (GEO + "GeometrySelect.cpp",), (), t.keep_symbols)
    if op == "MatMul" and "While" in runtime:
        return OpSite("geometric", t.op_types, t.files + (GEO + "GeometryBatchMatMul.cpp",), (), t.keep_symbols)
    if "Pooling3D" in graph:
        return OpSite("geometric", t.op_types, t.files + (GEO + "GeometryPooling3D.cpp",), (), t.keep_symbols)
    return t

#: converted-graph op types that are not compute (constants, layout changes of the graph I/O)
_NON_COMPUTE = {"Const", "ConvertTensor", "Input"}


def observed_types(obs: dict, default: tuple[str, ...]) -> tuple[str, ...]:
    """The runtime op types of one observation (``default`` when none), without the layout ``Raster``."""
    if not obs or not obs.get("runtime"):
        return default
    runtime = list(obs["runtime"])
    if "ConvertTensor" in obs.get("graph", []) and any(t != "Raster" for t in runtime):
        runtime = [t for t in runtime if t != "Raster"]
    return tuple(runtime)


def _with_observed(t: OpSite, obs: dict) -> OpSite:
    if t.mechanism == "composite":
        return t
    return OpSite(t.mechanism, observed_types(obs, t.op_types), t.files, t.new_files, t.keep_symbols)


def target_from(op: str, obs: dict, default: OpSite | None = None) -> OpSite:
    """The MNN target of an ``op`` node given one observation ``obs`` of its conversion (``{}``: none).

    ``default`` replaces :data:`OP_TARGETS`' entry (raises KeyError for an op without one and no default)."""
    return _with_observed(derive(op, default or OP_TARGETS[op], obs), obs)


def target_for(td: TaskDef) -> OpSite:
    """The MNN target of a task (raises KeyError for an op without an entry in :data:`OP_TARGETS`)."""
    obs = OBSERVED.get(td.id) or {}
    return _with_observed(TASK_TARGETS.get(td.id) or derive(td.op, OP_TARGETS[td.op], obs), obs)
