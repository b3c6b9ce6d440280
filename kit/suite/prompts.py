"""The initial prompt per task (MobileKernelBench appendix C.1 structure).

Sections, in order: role; the task; constraints (APIs, output format, allowed file names, mechanism-specific
structure, symbols and registrations to keep); MNN headers for the task's mechanism and category and the
current files being replaced, both **read from the configured MNN tree at build time** (never stored in this
repository); a one-shot example for the mechanism (``kit/suite/prompt_assets/<mechanism>.md``, original code); the
target operator: ``model.py``, shapes, dtypes, input ranges and tolerance from ``task.toml``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from importlib import resources
from pathlib import Path, PurePosixPath

from kit.settings.config import MNN_VERSION
from kit.suite.tasks import Task, TensorSpec

#: MNN headers shown for every task of a mechanism (paths relative to the MNN root)
MECHANISM_HEADERS: dict[str, tuple[str, ...]] = {
    "atomic": (
        "source/core/Execution.hpp",
        "source/backend/cpu/CPUBackend.hpp",
        "source/core/Backend.hpp",
        "source/core/TensorUtils.hpp",
        "source/core/Concurrency.h",
    ),
    "geometric": (
        "source/geometry/GeometryComputer.hpp",
        "source/geometry/GeometryComputerUtils.hpp",
        "source/core/TensorUtils.hpp",
        "source/core/Command.hpp",
    ),
    "composite": (
        "tools/converter/source/optimizer/onnxextra/OnnxExtraManager.hpp",
        "include/MNN/expr/Expr.hpp",
        "include/MNN/expr/MathOp.hpp",
        "include/MNN/expr/NeuralNetWorkOp.hpp",
    ),
}
#: extra headers for atomic kernels by category (helpers a fast kernel of that kind uses)
CATEGORY_HEADERS: dict[str, tuple[str, ...]] = {
    "unary": ("source/backend/cpu/UnaryUtils.hpp",),
    "activation": ("source/backend/cpu/UnaryUtils.hpp",),
    "trigonometry": ("source/backend/cpu/UnaryUtils.hpp",),
    "binary": ("source/backend/cpu/BinaryUtils.hpp",),
    "logic": ("source/backend/cpu/BinaryUtils.hpp",),
    "convolution": ("source/backend/cpu/CPUConvolution.hpp", "source/math/Vec.hpp"),
    "normalization": ("source/math/Vec.hpp",),
    "pooling": ("source/math/Vec.hpp",),
    "matrix": ("source/math/Vec.hpp",),
    "reduction": ("source/math/Vec.hpp",),
    "tensor": ("source/math/Vec.hpp",),
    "others": ("source/math/Vec.hpp",),
}
#: characters kept of one header / one current file before truncation
MAX_HEADER_CHARS = 12_000
MAX_CURRENT_CHARS = 30_000

_REGISTRATION = re.compile(
    r"^\s*(REGISTER_CPU_OP_CREATOR\w*\s*\([^)]*\)|REGISTER_GEOMETRY\s*\([^)]*\))", re.MULTILINE
)
_EXTRA_INSERT = re.compile(r"OnnxExtraManager::get\(\)\s*->\s*insert\(\s*\"([^\"]+)\"")

MECHANISM_TEXT = {
    "atomic": (
        "This is an **atomic CPU kernel**. Implement a subclass of `MNN::Execution` with\n"
        "  - `onResize(inputs, outputs)`: compute sizes and partitioning once per shape; acquire any scratch memory\n"
        "    from the backend's buffer allocator (`backend()->onAcquireBuffer(tensor, Backend::DYNAMIC)`) and release it\n"
        "    with `onReleaseBuffer` before returning, so later ops can reuse it;\n"
        "  - `onExecute(inputs, outputs)`: the computation (multi-threading with `MNN_CONCURRENCY_BEGIN/END` over\n"
        "    `static_cast<CPUBackend*>(backend())->threadNumber()` chunks; mind the tensor layout: 4-D float tensors may be\n"
        "    `MNN_DATA_FORMAT_NC4HW4`, see `TensorUtils::getDescribe(t)->dimensionFormat`);\n"
        "  - a `CPUBackend::Creator` subclass whose `onCreate` reads the op parameters and returns the execution,\n"
        "    registered with `REGISTER_CPU_OP_CREATOR(CreatorName, OpType_X)`."
    ),
    "geometric": (
        "This is a **geometry op**. Implement a subclass of `MNN::GeometryComputer` whose\n"
        "`onCompute(op, inputs, outputs, context, cmd)` expresses the op as memory regions (set the output's\n"
        "`TensorUtils::getDescribe(output)->memoryType = Tensor::InsideDescribe::MEMORY_VIRTUAL` and fill its `regions`\n"
        "with `Tensor::InsideDescribe::Region`s: `origin`, `src`/`dst` offset and strides, `size[3]`) that MNN's Raster\n"
        "executes, and/or as compute commands (`GeometryComputerUtils::makeBinary/makeUnary/...` appended to\n"
        "`cmd.command`, temporaries kept alive in `cmd.extras`). Register it from a static `_create()` function with\n"
        "`GeometryComputer::registerGeometryComputer(...)` and `REGISTER_GEOMETRY(Name, _create)`."
    ),
    "composite": (
        "This is a **converter (composite) op**: MNN's ONNX converter turns the node into an `Extra` op that a\n"
        "`MNN::Express::OnnxExtraManager::Transform` rewrites. Implement a subclass whose `onExecute(EXPRP expr)` reads\n"
        "the ONNX attributes from `expr->get()->main_as_Extra()->attr()` and the inputs from `expr->inputs()`, builds\n"
        "the result with the Express API (`_Add`, `_Select`, `_Const`, `_Scalar<float>`, ... from\n"
        "`MNN/expr/ExprCreator.hpp`), calls `setName(expr->name())` on the result and returns `result->expr().first`.\n"
        'Register it with a static initializer calling `OnnxExtraManager::get()->insert("<ONNX op type>", ...)`.'
    ),
}


class PromptError(Exception):
    """The MNN tree, a header, a current file or a task file needed by a prompt is missing."""


def _read_tree_file(mnn_root: Path, rel: str, what: str) -> str:
    p = mnn_root / rel
    if not p.is_file():
        raise PromptError(f"{what} {rel!r} not found in the MNN tree at {mnn_root} (mnn.source_dir)")
    return p.read_text(encoding="utf-8", errors="replace")


def _excerpt(text: str, max_chars: int, comment: str = "//") -> str:
    """Drop the leading ``//`` banner, then keep whole lines up to ``max_chars`` with a truncation marker."""
    lines = text.replace("\r\n", "\n").split("\n")
    start = 0
    while start < len(lines) and (lines[start].startswith("//") or not lines[start].strip()):
        start += 1
    lines = lines[start:]
    kept: list[str] = []
    used = 0
    for line in lines:
        if used + len(line) + 1 > max_chars:
            break
        kept.append(line)
        used += len(line) + 1
    body = "\n".join(kept).rstrip("\n")
    if len(kept) < len(lines):
        body += f"\n{comment} ... [truncated by the prompt builder: {len(kept)} of {len(lines)} lines shown]"
    return body


def _fence(lang: str, body: str) -> str:
    ticks = "```"
    while ticks in body:
        ticks += "`"
    return f"{ticks}{lang}\n{body}\n{ticks}"


def headers_for(task: Task) -> list[str]:
    """MNN-relative header paths shown for ``task`` (mechanism headers, then category extras for atomic
    tasks), minus the task's own files."""
    paths = list(MECHANISM_HEADERS[task.mechanism])
    if task.mechanism == "atomic":
        paths += CATEGORY_HEADERS.get(task.category, ())
    own = set(task.mnn.files)
    out: list[str] = []
    for p in paths:
        if p not in own and p not in out:
            out.append(p)
    return out


def allowed_file_names(task: Task) -> list[str]:
    """Basenames and ``new_files`` basename globs a candidate may use."""
    return [PurePosixPath(p).name for p in task.mnn.files] + [
        PurePosixPath(g).name for g in task.mnn.new_files
    ]


def one_shot(mechanism: str) -> str:
    """The one-shot example text for ``mechanism`` (kit/suite/prompt_assets/<mechanism>.md)."""
    return (
        resources.files("kit.suite")
        .joinpath("prompt_assets", f"{mechanism}.md")
        .read_text(encoding="utf-8")
        .strip()
    )


def _tensor_line(t: TensorSpec, role: str) -> str:
    shape = "[" + ", ".join(str(d) for d in t.shape) + "]"
    if role == "output":
        return f"| {t.name} | output | {shape} | {t.dtype} | |"
    if t.distribution == "normal":
        dist = f"normal(mean={t.low:g}, std={t.high:g})"
    elif t.distribution == "bool":
        dist = "random booleans"
    elif t.distribution == "integers":
        dist = f"integers in [{t.low:g}, {t.high:g}]"
    else:
        dist = f"{t.distribution} in [{t.low:g}, {t.high:g})"
    return f"| {t.name} | input | {shape} | {t.dtype} | {dist} |"


def _kept_registrations(current: dict[str, str]) -> list[str]:
    regs: list[str] = []
    for text in current.values():
        regs += [re.sub(r"\s+", " ", m.group(1)) for m in _REGISTRATION.finditer(text)]
        regs += [
            f'OnnxExtraManager::get()->insert("{m.group(1)}", ...)' for m in _EXTRA_INSERT.finditer(text)
        ]
    return list(dict.fromkeys(regs))


def _read_inputs(task: Task, mnn_root: Path) -> tuple[dict[str, str], dict[str, str], str]:
    """The headers (:func:`headers_for`) and current files (``task.mnn.files``) read from ``mnn_root``, each
    MNN-relative path → text, and the task's ``model.py`` text.

    Raises:
        PromptError: as :func:`build_prompt` (checked in this order: the tree, headers, current files,
            ``model.py``).
    """
    if not mnn_root.is_dir():
        raise PromptError(
            f"MNN source tree not found: {mnn_root} (set mnn.source_dir to an MNN {MNN_VERSION} checkout)"
        )
    headers = {rel: _read_tree_file(mnn_root, rel, "header") for rel in headers_for(task)}
    current = {
        rel: _read_tree_file(mnn_root, rel, f"file of task {task.id!r} (mnn.files)") for rel in task.mnn.files
    }
    if task.path is None or not task.model_py_path.is_file():
        where = task.model_py_path if task.path is not None else "(task.path not set)"
        raise PromptError(f"task {task.id!r}: model.py not found: {where}")
    return headers, current, task.model_py_path.read_text(encoding="utf-8")


def _role_section() -> str:
    """``# Role``: the expert persona and the MNN version (appendix C.1)."""
    return (
        "# Role\n\n"
        f"You are an expert in MNN CPU kernel development. You write correct, fast C++ operator implementations for\n"
        f"the CPU backend of the MNN inference engine (version {MNN_VERSION}) running on mobile ARM CPUs."
    )


def _task_section(task: Task) -> str:
    """``# Task``: the ONNX op, its description, category, mechanism and MNN op types (appendix C.1)."""
    desc = f" {task.description.strip()}" if task.description.strip() else ""
    return (
        "# Task\n\n"
        f"Implement the ONNX operator `{task.op_type}` (opset {task.opset}) for MNN's CPU backend.{desc}\n"
        f"Category: {task.category}. Mechanism: {task.mechanism}. MNN runs it as op type(s): "
        + ", ".join(f"`{t}`" for t in task.mnn_op_types)
        + ".\nYour code must match the PyTorch reference below within the tolerance and should be faster than MNN's "
        "own implementation."
    )


def _output_rules(task: Task) -> list[str]:
    """The first constraints: allowed APIs, the output format (one fenced block per file, named on its
    first line) and the allowed file names (:func:`allowed_file_names`) (appendix C.1, constraints)."""
    names = allowed_file_names(task)
    cpp_names = [n for n in names if n.endswith(".cpp")] or names
    example_name = cpp_names[0].replace("*", task.op_type)
    return [
        (
            "Use only MNN's own internal APIs (those shown below and others that exist in the MNN tree) and "
            "standard C++17. No external libraries, no new third-party headers."
        ),
        (
            "Output every file in its own fenced code block (```cpp). The FIRST line of each block is a comment "
            f"with the file name only, e.g. `// {example_name}`. Text outside the blocks is "
            "ignored."
        ),
        (
            "Allowed file names for this task: "
            + ", ".join(f"`{n}`" for n in names)
            + (" (`*`: any name characters)" if any("*" in n for n in names) else "")
            + ". Any other file name is rejected; at least one `.cpp` file is required. A file you do not "
            "output keeps its current content. Do not change CMake files, the op registries or any other file."
        ),
    ]


def _constraints_section(task: Task, regs: list[str]) -> str:
    """``# Constraints``, numbered: :func:`_output_rules`, the mechanism's structure (:data:`MECHANISM_TEXT`),
    the registrations ``regs`` (:func:`_kept_registrations`) and ``task.mnn.keep_symbols`` to keep when
    there are any, and the float32 / int32 rule (appendix C.1, constraints)."""
    constraints = [*_output_rules(task), MECHANISM_TEXT[task.mechanism]]
    if regs:
        constraints.append(
            "Keep these registrations exactly (MNN's generated registry calls them by name): "
            + "; ".join(f"`{r}`" for r in regs)
            + "."
        )
    if task.mnn.keep_symbols:
        constraints.append(
            "Keep these public symbols with the same signatures (other MNN files use them): "
            + ", ".join(f"`{s}`" for s in task.mnn.keep_symbols)
            + "."
        )
    constraints.append(
        "Computation is float32 (precision high). MNN has no int64 or bool tensors at run time: they are int32."
    )
    return "# Constraints\n\n" + "\n".join(f"{i}. {c}" for i, c in enumerate(constraints, 1))


def _tree_files_section(title: str, files: dict[str, str], max_chars: int) -> str:
    """A section ``title`` with one ``## <path>`` subsection per file of ``files`` (MNN-relative path →
    text), each an :func:`_excerpt` of at most ``max_chars`` in a ``cpp`` fence."""
    blocks = [f"## {rel}\n\n{_fence('cpp', _excerpt(text, max_chars))}" for rel, text in files.items()]
    return f"{title}\n\n" + "\n\n".join(blocks)


def _new_files_section(task: Task) -> str:
    """``# New files``: where files matching ``task.mnn.new_files`` are placed (MNN-relative globs)."""
    return (
        "# New files\n\nNew files are placed by name: "
        + ", ".join(f"`{g}`" for g in task.mnn.new_files)
        + " (paths relative to the MNN root)."
    )


def _target_section(task: Task, model_py: str) -> str:
    """``# Target operator``: ``model.py``, the inputs and outputs table (:func:`_tensor_line`) and the
    tolerance, all from the task folder (appendix C.1)."""
    rows = [_tensor_line(t, "input") for t in task.inputs] + [_tensor_line(t, "output") for t in task.outputs]
    return (
        "# Target operator\n\n"
        "## PyTorch reference (model.py)\n\n"
        + _fence("python", model_py.rstrip("\n"))
        + "\n\n## Inputs and outputs\n\n| name | role | shape | dtype | test values |\n|---|---|---|---|---|\n"
        + "\n".join(rows)
        + f"\n\n## Tolerance\n\nElement-wise `|out - ref| <= atol + rtol * |ref|` with atol = {task.tolerance.atol:g}, "
        f"rtol = {task.tolerance.rtol:g}, against ONNX Runtime on several random input sets."
    )


_ANSWER_SECTION = (
    "# Answer\n\nReply with the complete content of each file you change, one fenced code block per file, the "
    "file name as the first line of each block."
)


def build_prompt(task: Task, mnn_root: Path) -> str:
    """The initial prompt for ``task`` as Markdown text.

    Args:
        task: a loaded task (``task.path`` set: its ``model.py`` is embedded).
        mnn_root: the MNN source tree (``mnn.source_dir``); headers and current files are read from it.

    Raises:
        PromptError: ``mnn_root`` is not a directory, a header or a file of ``task.mnn.files`` is missing
            from it, or the task's ``model.py`` is missing.  The message names the path.
    """
    headers, current, model_py = _read_inputs(task, mnn_root)
    parts = [
        _role_section(),
        _task_section(task),
        _constraints_section(task, _kept_registrations(current)),
        _tree_files_section(f"# MNN headers ({task.mechanism} mechanism)", headers, MAX_HEADER_CHARS),
    ]
    if current:
        parts.append(
            _tree_files_section(
                "# Current implementation (the files you replace)", current, MAX_CURRENT_CHARS
            )
        )
    if task.mnn.new_files:
        parts.append(_new_files_section(task))
    parts.append("# Example\n\n" + one_shot(task.mechanism))
    parts.append(_target_section(task, model_py))
    parts.append(_ANSWER_SECTION)
    return "\n\n".join(parts) + "\n"


def write_prompts(tasks: Iterable[Task], mnn_root: Path, out_dir: Path) -> Path:
    """Write ``out_dir/<task_id>.md`` and ``out_dir/prompts.jsonl`` (lines ``{"task_id", "prompt"}``).

    Returns the path of ``prompts.jsonl``.  Files are written to a temporary name and renamed.

    Raises:
        PromptError: as :func:`build_prompt` (nothing is written for a failing suite: all prompts are
            built before any file is written).
    """
    built = [(t.id, build_prompt(t, mnn_root)) for t in tasks]
    out_dir.mkdir(parents=True, exist_ok=True)
    for tid, text in built:
        _write_atomic(out_dir / f"{tid}.md", text)
    jsonl = out_dir / "prompts.jsonl"
    _write_atomic(
        jsonl,
        "".join(
            json.dumps({"task_id": tid, "prompt": text}, ensure_ascii=False) + "\n" for tid, text in built
        ),
    )
    return jsonl


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
