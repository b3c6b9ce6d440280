"""One source (a problem file or an ONNX model) -> one complete task folder in a staging directory.

:func:`build_task` exports (problem files: :mod:`kit.suite.importer.problem`), reduces the graph to its target op
(:mod:`kit.suite.importer.reduce`), names the parameters as ``model.py``'s state dict does (so the audit loads them),
infers the inputs (:mod:`kit.suite.importer.specs`), maps the op to MNN (:mod:`kit.suite.importer.mapping`, after an
observation of the native conversion) and writes ``task.toml``, ``model.py`` and ``model.onnx``.  Any failure
raises :class:`~kit.suite.importer.problem.ImportFailure`; the caller discards the staging folder then.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import onnx.version_converter
from onnx import numpy_helper

from kit.suite.edges import declare
from kit.suite.importer import mapping
from kit.suite.importer import specs as inp
from kit.suite.importer.onnxsrc import fix_dims, onnx_model_py, sample_feeds
from kit.suite.importer.problem import BUDGET_BYTES, EXPORT_MEMORY_BYTES, ImportFailure, export_problem
from kit.suite.importer.reduce import reduce_graph, run_ort
from kit.suite.importer.shapeinputs import fix_shape_inputs, widen_indices
from kit.suite.spec import IR_VERSION, OPSET
from kit.suite.tasks import (
    CATEGORIES,
    MnnTarget,
    Task,
    TaskError,
    TaskSource,
    TensorSpec,
    load_task,
    sha256_file,
)
from kit.suite.tomlw import dumps_mapping

_DT = {np.dtype(np.float32): "float32", np.dtype(np.int32): "int32", np.dtype(np.int64): "int64",
       np.dtype(np.bool_): "bool"}


@dataclass(frozen=True)
class Source:
    """One file to import: its path, its name as recorded (relative to the imported folder), the category
    its folder names (None: from the op), and the pinned upstream ``owner/repo@commit:path`` if any."""

    path: Path
    name: str
    category: str | None = None
    upstream: str = ""


#: the tolerance (atol = rtol) of an imported task: what the paper's pipelines accepted.  MobileKernelBench's
#: authors checked candidates with MNN's model test (``MNNConvert ... --testdir``), whose default tolerance is 0.01,
#: and an allclose at 2e-3; one 1e-4 for every op failed correct kernels of the paper's own tasks (its
#: Winograd_Convolution_2D: native MNN's error 2.3e-3)
PAPER_TOLERANCE = 1e-2
PAPER_TOLERANCE_REASON = ("the paper's pipelines' tolerance: MNN's model test (MNNConvert --testdir) accepts 0.01 by "
                          "default; set on import for every imported task, the audit shows native's error beside it")


@dataclass(frozen=True)
class Options:
    """Import settings (units in the names)."""

    budget_bytes: int = BUDGET_BYTES
    memory_limit_bytes: int = EXPORT_MEMORY_BYTES
    widen_inputs: bool = False
    id_prefix: str = ""
    mnn_root: Path | None = None
    converter: Path | None = None
    probe_native: bool = True
    atol: float = PAPER_TOLERANCE
    rtol: float = PAPER_TOLERANCE
    tolerance_reason: str = PAPER_TOLERANCE_REASON
    #: who set the tolerance (:class:`kit.suite.tasks.Tolerance`'s ``method``): the paper's default or ``--tolerance``
    tolerance_method: str = "paper"
    seed: int = 0
    #: ``--dim NAME=N``: (dim_param, length) pairs fixing dynamic dimensions of a given ONNX model's inputs
    dims: tuple[tuple[str, int], ...] = ()


@dataclass
class StagedTask:
    task: Task
    folder: Path
    notes: list[str] = field(default_factory=list)


def task_id(stem: str, prefix: str = "") -> str:
    """``prefix`` + the file stem lower-cased, runs of other characters as one "_" ("ConvTranspose_2D__x" ->
    "convtranspose_2d_x")."""
    s = re.sub(r"[^a-z0-9]+", "_", stem.lower()).strip("_")
    s = prefix + s
    return s if re.match(r"^[a-z0-9]", s) else "t_" + s


def category_of(folder_name: str | None) -> str | None:
    """The kit category a folder name stands for (case-insensitive), or None."""
    if folder_name is None:
        return None
    low = folder_name.lower()
    return low if low in CATEGORIES else None


def _restore_param_names(model: onnx.ModelProto, params: dict[str, np.ndarray]) -> None:
    """Rename initializers to the state-dict key holding the same values (same size, equal when flattened),
    in place, so that the audit can load ``model.py``'s parameters from them."""
    names = {i.name for i in model.graph.initializer}
    taken: set[str] = set()
    for key, value in params.items():
        if key.endswith("num_batches_tracked") or key in names:
            continue
        for init in model.graph.initializer:
            if init.name in taken or init.name in params:
                continue
            arr = numpy_helper.to_array(init)
            if arr.size == value.size and np.array_equal(arr.reshape(-1), value.reshape(-1).astype(arr.dtype)):
                old = init.name
                init.name = key
                for node in model.graph.node:
                    node.input[:] = [key if i == old else i for i in node.input]
                taken.add(key)
                break


def _finish_model(model: onnx.ModelProto, graph_name: str) -> onnx.ModelProto:
    model.graph.name = graph_name
    model.producer_name = "mobilekernelbench-kit importer"
    model.ir_version = IR_VERSION
    del model.opset_import[:]
    model.opset_import.append(onnx.helper.make_opsetid("", OPSET))
    for vi in list(model.graph.value_info):
        model.graph.value_info.remove(vi)
    return model


def _at_opset(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` converted to the kit's opset by ONNX's version converter, which also renames the attribute
    values that changed between opsets (GridSample's ``bilinear`` became ``linear`` in opset 20).

    Raises:
        ImportFailure: ``bad_model`` when the converter cannot take the model's opset there."""
    have = {o.domain: o.version for o in model.opset_import}.get("", OPSET)
    if have == OPSET:
        return model
    try:
        return onnx.version_converter.convert_version(model, OPSET)
    except Exception as exc:  # noqa: BLE001 - the converter raises several types
        raise ImportFailure("bad_model", f"the ONNX version converter cannot take opset {have} to {OPSET}: "
                                         f"{str(exc)[:300]}") from None


def _output_specs(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[TensorSpec]:
    specs = []
    for o, arr in zip(model.graph.output, run_ort(model, feeds)):
        if arr.dtype not in _DT:
            raise ImportFailure("unsupported_output", f"output {o.name} has dtype {arr.dtype} (the kit supports "
                                                      "float32, int32, int64, bool)")
        if any(d == 0 for d in arr.shape):
            raise ImportFailure("unsupported_output", f"output {o.name} is empty (shape {list(arr.shape)})")
        specs.append(TensorSpec(name=o.name, shape=list(arr.shape), dtype=_DT[arr.dtype]))
    return specs


def _exported(src: Source, work: Path, opts: Options):
    """(raw model, feeds, model.py text, input specs, source fields) of one source."""
    if src.path.suffix == ".onnx":
        try:
            raw = onnx.load(str(src.path))
            onnx.checker.check_model(raw, full_check=True)
        except Exception as exc:  # noqa: BLE001 - onnx raises several types
            raise ImportFailure("bad_model", f"onnx.checker / load failed: {str(exc)[:300]}") from None
        dims = fix_dims(raw, dict(opts.dims))
        raw = _at_opset(raw)
        specs, feeds = sample_feeds(raw, opts.seed)
        specs, feeds, fixed = fix_shape_inputs(raw, specs, feeds)
        evidence = [f"{s.name}: graph input, default range (no get_inputs)" for s in specs] + dims + fixed
        return raw, feeds, None, specs, {"exporter": "given", "input_evidence": evidence}
    exp = export_problem(src.path, work, budget_bytes=opts.budget_bytes, memory_limit_bytes=opts.memory_limit_bytes,
                         seed=opts.seed)
    feeds = dict(np.load(work / "inputs.npz"))
    raw = onnx.load(str(work / "raw.onnx"))
    if {o.domain: o.version for o in raw.opset_import}.get("", OPSET) != OPSET:  # the dynamo exporter's choice
        raw = onnx.version_converter.convert_version(raw, OPSET)
    specs, evidence = [], []
    for i in exp.inputs:
        spec, why = inp.infer_spec(i["name"], i["dtype"], i["shape"], i["stats"])
        specs.append(spec)
        evidence.append(f"{i['name']}: {why}")
    fields = {"exporter": f"torch {exp.torch_version} {exp.exporter}, opset {OPSET}",
              "input_evidence": evidence, "scaled": [f"{k}: {a} -> {b}" for k, (a, b) in exp.scaled.items()],
              "measured_bytes": exp.measured_bytes, "params": dict(np.load(work / "params.npz"))}
    return raw, feeds, (work / "model.py").read_text(encoding="utf-8"), specs, fields


def dumps_task(task: Task) -> str:
    """``task.toml`` text of ``task`` (outputs carry only name, shape and dtype, as in the built-in suite)."""
    data = task.model_dump(exclude_none=True, exclude={"path"})
    data["outputs"] = [{k: o[k] for k in ("name", "shape", "dtype")} for o in data["outputs"]]
    return dumps_mapping(data)


def _write(folder: Path, task: Task, model: onnx.ModelProto, model_py: str) -> Task:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "task.toml").write_text(dumps_task(task), encoding="utf-8")
    (folder / "model.onnx").write_bytes(model.SerializeToString())
    (folder / "model.py").write_text(model_py, encoding="utf-8")
    try:
        return load_task(folder)
    except TaskError as exc:
        raise ImportFailure("bad_model", f"the written task does not load: {exc}") from None


def _with_target(task: Task, op: str, obs: dict, opts: Options) -> Task:
    tgt, note = mapping.target(op, obs, opts.mnn_root)
    src = task.source.model_copy(update={"native_converts": bool(obs.get("graph")) if obs else None,
                                         "mapping_note": note})
    return task.model_copy(update={"mechanism": tgt.mechanism, "mnn_op_types": list(tgt.op_types),
                                   "mnn": MnnTarget(files=list(tgt.files), new_files=list(tgt.new_files),
                                                    keep_symbols=list(tgt.keep_symbols)), "source": src})


def build_task(src: Source, opts: Options, stage: Path, split: str = "train") -> StagedTask:
    """Build the task of ``src`` under ``stage/<category>/<id>`` (``stage/work`` is scratch, removed).

    Raises:
        ImportFailure: the source cannot become a task (its ``kind`` and message say why).
    """
    work = stage / "work"
    try:
        raw, feeds, model_py, specs, fields = _exported(src, work, opts)
        params = fields.pop("params", {})
        red = reduce_graph(raw, feeds)
        model = _finish_model(red.model, task_id(src.path.stem, opts.id_prefix))
        _restore_param_names(model, params)
        outputs = _output_specs(model, feeds)
        tid = task_id(src.path.stem, opts.id_prefix)
        category = src.category or mapping.op_categories().get(red.target_op, "others")
        if opts.widen_inputs:
            specs, widened = widen_indices(model, [inp.widen(s) for s in specs])
            fields["input_evidence"] = [*fields["input_evidence"], *widened]
        source = TaskSource(kind="onnx" if src.path.suffix == ".onnx" else "problem", file=src.name,
                            sha256=sha256_file(src.path), upstream=src.upstream, exported_ops=red.exported_ops,
                            reductions=red.steps, helper_ops=red.helpers, budget_bytes=opts.budget_bytes,
                            inputs_widened=opts.widen_inputs, torch_seed=opts.seed,
                            **fields)
        desc = f"{red.target_op} imported from {src.name}" + (f" ({src.upstream})" if src.upstream else "") + "."
        task = Task(id=tid, category=category, op_type=red.target_op, opset=OPSET, mechanism="composite", split=split,
                    description=desc, mnn_op_types=["*"],
                    tolerance={"atol": opts.atol, "rtol": opts.rtol, "reason": opts.tolerance_reason,
                               "method": opts.tolerance_method},
                    inputs=specs, outputs=outputs, mnn={"new_files": ["provisional"]}, source=source,
                    edges=declare(red.target_op, specs, model))
        folder = stage / category / tid
        py = model_py if model_py is not None else onnx_model_py(task)
        task = _write(folder, task, model, py)
        obs = mapping.observe(task, opts.converter, work / "probe") if opts.probe_native else {}
        task = _write(folder, _with_target(task, red.target_op, obs, opts), model, py)
        return StagedTask(task, folder)
    except ImportFailure:
        raise
    except Exception as exc:  # noqa: BLE001 - an unexpected failure is this source's, with its type
        raise ImportFailure("import_error", f"{type(exc).__name__}: {str(exc)[:300]}") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
