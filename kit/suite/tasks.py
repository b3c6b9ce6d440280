"""The task suite: schema of ``tasks/<category>/<task_id>/task.toml``, loading, validation and splits.

A task folder holds ``task.toml`` (this schema), ``model.py`` (KernelBench format: ``Model``,
``get_inputs``, ``get_init_inputs``) and ``model.onnx`` (opset 20, exactly one node of ``op_type``).
``tasks/manifest.json`` lists every task with the sha256 of each of its files and the split (:mod:`kit.suite.listing`).
"""

from __future__ import annotations

import fnmatch
import glob
import hashlib
import tomllib
from functools import cached_property
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from kit.settings.base import StrictModel

#: the 12 categories of the paper's Table 3, in its order
CATEGORIES: tuple[str, ...] = (
    "unary",
    "binary",
    "trigonometry",
    "activation",
    "normalization",
    "pooling",
    "convolution",
    "matrix",
    "reduction",
    "tensor",
    "logic",
    "others",
)

Mechanism = Literal["atomic", "geometric", "composite"]
DType = Literal["float32", "int32", "int64", "bool"]


class TaskError(Exception):
    """A task folder or the manifest is invalid; the message names the file and the field."""


class TensorSpec(StrictModel):
    """A graph input or output.

    Inputs are drawn per trial from ``distribution`` with a seeded generator:
    ``uniform`` floats in [low, high); ``normal`` with mean ``low`` and std ``high``; ``integers`` in
    [low, high] inclusive; ``bool`` fair coin; ``positive`` uniform in [low, high) with low > 0 enforced.
    """

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    shape: list[int]
    dtype: DType = "float32"
    distribution: Literal["uniform", "normal", "integers", "bool", "positive"] = "uniform"
    low: float = -1.0
    high: float = 1.0

    @field_validator("shape")
    @classmethod
    def _positive(cls, v: list[int]) -> list[int]:
        if any(d <= 0 for d in v):
            raise ValueError("every dimension must be > 0")
        return v


#: the paper's tolerance (atol = rtol): MNN's model test (``MNNConvert --testdir``), which the authors' pipelines
#: ran, accepts 0.01 by default (their allclose used 2e-3); printed beside a task's own by ``mkb tasks audit``
PAPER_ATOL = 1e-2


class Tolerance(StrictModel):
    """Element-wise check ``|out - ref| <= atol + rtol * |ref|`` (numpy.allclose semantics); ``reason``: how the
    figures were set, in words ("" in task folders written before reasons were kept).

    ``method`` says who set them: "derived" (:mod:`kit.suite.tolerance`, from independent references and the
    accumulation length ``accumulation_length``), "hand" (the suite's definition), "paper" (the importer's
    default), "given" (``mkb tasks import --tolerance``); "" in older task folders.  ``paper_atol``: the paper's
    tolerance, reported beside."""

    atol: float = Field(default=1e-4, ge=0)
    rtol: float = Field(default=1e-4, ge=0)
    reason: str = ""
    method: Literal["", "derived", "hand", "paper", "given"] = ""
    #: the number of terms one output element accumulates (K of the derivation; 0: not derived)
    accumulation_length: int = Field(default=0, ge=0)
    paper_atol: float = Field(default=PAPER_ATOL, ge=0)


#: the edge input sets a task may declare (:mod:`kit.suite.edges` draws them and says which op classes get which)
EDGE_SET_NAMES: tuple[str, ...] = ("ties", "negative_indices", "special_values", "large_magnitude", "denormals",
                                   "size_one_axes", "empty_axes")

#: the edge sets that cut an axis of their inputs (``EdgeSpec.axis``): another input shape than the task's
AXIS_EDGE_SETS: frozenset[str] = frozenset({"size_one_axes", "empty_axes"})


class EdgeSpec(StrictModel):
    """An edge input set of the task (``[[edges]]``): ``name`` (one of :data:`EDGE_SET_NAMES`), the graph
    ``inputs`` it rewrites (the others keep the distribution's draw) and ``why`` the op needs it.  Verification
    runs every declared set after the distribution's trials (:func:`kit.stages.verify.run_edges`).  ``axis``
    (``size_one_axes`` and ``empty_axes`` only, which need it): the axis of each input cut to length 1 (to
    length 0), in [0, rank)."""

    name: Literal["ties", "negative_indices", "special_values", "large_magnitude", "denormals", "size_one_axes",
                  "empty_axes"]
    inputs: list[str] = Field(min_length=1)
    why: str = ""
    axis: int | None = Field(default=None, ge=0)


class MnnTarget(StrictModel):
    """Where a candidate goes in the MNN tree (paths relative to the MNN root, POSIX)."""

    #: existing files a candidate may replace (by basename); the first .cpp is the main one
    files: list[str] = Field(default_factory=list)
    #: globs (relative to the MNN root) for new files a candidate may add, e.g.
    #: ``tools/converter/source/optimizer/onnxextra/Onnx*.cpp``
    new_files: list[str] = Field(default_factory=list)
    #: public symbols of the replaced files that the rest of MNN uses; a candidate must keep them
    keep_symbols: list[str] = Field(default_factory=list)

    @field_validator("files", "new_files")
    @classmethod
    def _relative(cls, v: list[str]) -> list[str]:
        for p in v:
            pp = PurePosixPath(p)
            if pp.is_absolute() or ".." in pp.parts:
                raise ValueError(f"path must be relative inside the MNN tree: {p!r}")
        return v


class TaskSource(StrictModel):
    """Where an imported task comes from and what the importer did (``[source]``; absent for built-in tasks)."""

    #: "problem" (a KernelBench-format .py file) or "onnx" (an ONNX model)
    kind: Literal["problem", "onnx"]
    #: the file as named under the imported folder (or its name)
    file: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    #: "owner/repo@commit:path" for a file of a pinned upstream set ("" otherwise)
    upstream: str = ""
    #: how the ONNX graph was made ("torch 2.13.0 TorchScript exporter (dynamo=False), opset 20"; "given")
    exporter: str = ""
    #: op types of the exported graph, before reduction
    exported_ops: list[str] = Field(default_factory=list)
    #: reduction steps applied, in order (each exact; see kit.suite.importer.reduce)
    reductions: list[str] = Field(default_factory=list)
    #: shape-only nodes kept around the target op (Squeeze, Reshape, ...; see kit.suite.importer.reduce)
    helper_ops: list[Literal["Squeeze", "Unsqueeze", "Reshape", "Flatten", "Cast"]] = Field(default_factory=list)
    #: module-level constants scaled down to the budget ("batch_size: 4096 -> 256")
    scaled: list[str] = Field(default_factory=list)
    #: bytes of inputs + parameters + outputs allowed (the budget scaling aimed at) and measured
    budget_bytes: int = Field(default=0, ge=0)
    measured_bytes: int = -1
    #: float input ranges made symmetric around zero (``--widen-inputs``)
    inputs_widened: bool = False
    #: per input, the evidence its distribution was inferred from
    input_evidence: list[str] = Field(default_factory=list)
    #: whether native MNN converted the model when it was imported (None: not checked), and how it was mapped
    native_converts: bool | None = None
    mapping_note: str = ""
    #: torch's seed when model.py's Model was built for the export: the parameters no ONNX initializer keeps by
    #: name (an LSTM's weights are reordered into W, R, B) are drawn again from it by the audit
    torch_seed: int = 0


class Task(StrictModel):
    """One benchmark problem (see module docstring)."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_]*$")
    category: Literal[CATEGORIES]  # type: ignore[valid-type]
    op_type: str
    opset: int = 20
    mechanism: Mechanism
    split: Literal["train", "test"]
    description: str = ""
    #: MNN runtime op types whose summed time is the task's op time; ["*"] = every op of the model
    mnn_op_types: list[str] = Field(min_length=1)
    tolerance: Tolerance = Tolerance()
    inputs: list[TensorSpec] = Field(min_length=1)
    outputs: list[TensorSpec] = Field(min_length=1)
    mnn: MnnTarget = MnnTarget()
    #: edge input sets verification runs after the distribution's trials (none: the task has no edge class)
    edges: list[EdgeSpec] = Field(default_factory=list)
    #: imported tasks only: origin and what the importer did
    source: TaskSource | None = None

    #: folder of the task (set by the loader, not in the TOML)
    path: Path | None = Field(default=None, exclude=True)

    @model_validator(mode="after")
    def _check(self) -> Task:
        names = [t.name for t in self.inputs] + [t.name for t in self.outputs]
        if len(set(names)) != len(names):
            raise ValueError(f"input/output names must be unique: {names}")
        by_name = {t.name: t for t in self.inputs}
        for e in self.edges:
            for name in e.inputs:
                if name not in by_name:
                    raise ValueError(f"edges ({e.name}): {name!r} is not an input of the task")
                wanted = "int" if e.name == "negative_indices" else "float"
                if e.name != "empty_axes" and not by_name[name].dtype.startswith(wanted):  # a shape only: any dtype
                    raise ValueError(f"edges ({e.name}): input {name!r} is {by_name[name].dtype}, the set needs {wanted}")
                if (e.name in AXIS_EDGE_SETS) != (e.axis is not None):
                    raise ValueError(f"edges ({e.name}): axis is given for size_one_axes and empty_axes, and only "
                                     "for them")
                if e.axis is not None and e.axis >= len(by_name[name].shape):
                    raise ValueError(f"edges ({e.name}): axis {e.axis} is not an axis of {name!r} "
                                     f"(rank {len(by_name[name].shape)})")
        if not self.mnn.files and not self.mnn.new_files:
            raise ValueError("mnn.files and mnn.new_files are both empty: a candidate could place no file")
        return self

    @property
    def onnx_path(self) -> Path:
        assert self.path is not None
        return self.path / "model.onnx"

    @property
    def model_py_path(self) -> Path:
        assert self.path is not None
        return self.path / "model.py"

    @cached_property
    def allowed_names(self) -> dict[str, str]:
        """Basename → MNN-relative path of every replaceable file."""
        return {PurePosixPath(p).name: p for p in self.mnn.files}

    def place(self, basename: str) -> str | None:
        """MNN-relative path where a candidate file named ``basename`` goes, or None if not allowed."""
        if basename in self.allowed_names:
            return self.allowed_names[basename]
        for pattern in self.mnn.new_files:
            pp = PurePosixPath(pattern)
            if fnmatch.fnmatchcase(basename, pp.name):
                return str(pp.parent / basename)
        return None


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def load_task(folder: Path) -> Task:
    """Load and validate ``folder/task.toml``; ``model.py`` and ``model.onnx`` must exist.

    Raises:
        TaskError: missing file, invalid TOML, or a schema violation (the message names file and field).
    """
    toml_path = folder / "task.toml"
    if not toml_path.is_file():
        raise TaskError(f"{toml_path}: missing")
    try:
        data = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise TaskError(f"{toml_path}: invalid TOML: {exc}") from exc
    try:
        task = Task(**data, path=folder)
    except ValidationError as exc:
        msgs = "; ".join(f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise TaskError(f"{toml_path}: {msgs}") from None
    if task.id != folder.name:
        raise TaskError(f"{toml_path}: id {task.id!r} differs from its folder name {folder.name!r}")
    if task.category != folder.parent.name:
        raise TaskError(f"{toml_path}: category {task.category!r} differs from its parent folder {folder.parent.name!r}")
    for name in ("model.py", "model.onnx"):
        if not (folder / name).is_file():
            raise TaskError(f"{folder / name}: missing")
    return task


def load_suite(tasks_dir: Path, split: str = "all", ids: list[str] | None = None) -> list[Task]:
    """All tasks under ``tasks_dir`` (``<category>/<task_id>/``), filtered by split and ids, sorted by id.

    Raises:
        TaskError: an invalid task, duplicate ids, or an id in ``ids`` that does not exist.
    """
    if not tasks_dir.is_dir():
        raise TaskError(f"{tasks_dir}: task directory not found")
    tasks: dict[str, Task] = {}
    for toml_path in sorted(tasks_dir.glob("*/*/task.toml")):
        t = load_task(toml_path.parent)
        if t.id in tasks:
            raise TaskError(f"{toml_path}: duplicate task id {t.id!r} (also in {tasks[t.id].path})")
        tasks[t.id] = t
    if ids:
        unknown = sorted(set(ids) - set(tasks))
        if unknown:
            raise TaskError(f"tasks.ids: unknown task ids {unknown} in {tasks_dir}")
        selected = [tasks[i] for i in ids]
    else:
        selected = list(tasks.values())
    if split != "all":
        selected = [t for t in selected if t.split == split]
    return sorted(selected, key=lambda t: t.id)


def find_task(tasks_dir: Path, task_id: str) -> Task:
    """The task ``task_id`` of the suite under ``tasks_dir`` (``<category>/<task_id>/``), without loading the
    others (:func:`load_suite` reads all 190: ~0.5 s of a one-candidate check).

    Raises:
        TaskError: no task directory, no task of that id (or two of it), or an invalid task."""
    if not tasks_dir.is_dir():
        raise TaskError(f"{tasks_dir}: task directory not found")
    found = sorted(tasks_dir.glob(f"*/{glob.escape(task_id)}/task.toml")) if "/" not in task_id else []
    if not found:
        raise TaskError(f"--task: unknown task id {task_id!r} in {tasks_dir}")
    if len(found) > 1:
        raise TaskError(f"{found[1]}: duplicate task id {task_id!r} (also in {found[0].parent})")
    return load_task(found[0].parent)
