"""Export one KernelBench-format problem file to ONNX, in a child process (run as a script through
:mod:`kit.host.proc` with a memory limit; see :func:`kit.suite.importer.problem.export_problem`).

The child imports nothing from ``kit``.  It reads a JSON job (problem file, output folder, opset, budget of
bytes, the module-level constants it may scale), and:

1. executes the file on torch's ``meta`` device (no memory is allocated) to measure the bytes of the inputs,
   parameters and outputs; while they exceed the budget it halves the largest scalable constant (a
   module-level ``NAME = <int>`` read by ``get_inputs``) and measures again;
2. executes the (scaled) file on the CPU: ``Model(*get_init_inputs())`` in eval mode, ``get_inputs()``,
   ``forward``; writes ``inputs.npz`` (the sample inputs), ``outputs.npz`` (torch's outputs),
   ``params.npz`` (the state dict) and ``raw.onnx`` (``torch.onnx.export``, TorchScript exporter);
3. prints one JSON line ``{"mkb_export": {...}}``: ``ok``, ``kind`` of failure (``bad_file``,
   ``missing_package``, ``unsupported_input``, ``over_budget``, ``export_failed``), ``error``, the input and
   output names/dtypes/shapes, per-input value statistics, and the constants it scaled.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import json
import re
import sys
import traceback
from pathlib import Path

_DTYPES = {"torch.float32": "float32", "torch.int32": "int32", "torch.int64": "int64", "torch.bool": "bool"}


class ExportFailure(Exception):
    """A failure with its kind (one of the module docstring's kinds)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def scalable_constants(source: str) -> dict[str, int]:
    """Module-level ``NAME = <int literal>`` assignments (value >= 2) whose name ``get_inputs`` reads."""
    tree = ast.parse(source)
    consts: dict[str, int] = {}
    read: set[str] = set()
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Constant) and type(node.value.value) is int and node.value.value >= 2):
            consts[node.targets[0].id] = node.value.value
        if isinstance(node, ast.FunctionDef) and node.name == "get_inputs":
            read |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    return {k: v for k, v in consts.items() if k in read}


def rewrite_constants(source: str, values: dict[str, int]) -> str:
    """``source`` with the literal of each module-level ``NAME = <int>`` in ``values`` replaced (text edit of
    that literal only: comments and layout stay)."""
    lines = source.splitlines(keepends=True)
    tree = ast.parse(source)
    edits = []
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id in values and isinstance(node.value, ast.Constant)):
            v = node.value
            edits.append((v.lineno - 1, v.col_offset, v.end_col_offset, str(values[node.targets[0].id])))
    for row, start, end, text in sorted(edits, reverse=True):
        line = lines[row].encode()
        lines[row] = (line[:start] + text.encode() + line[end:]).decode()
    return "".join(lines)


def _load(source: str, path: str):
    name = "mkb_problem_" + re.sub(r"\W", "_", Path(path).stem)
    spec = importlib.util.spec_from_loader(name, loader=None, origin=path)
    module = importlib.util.module_from_spec(spec)
    module.__file__ = path
    try:
        exec(compile(source, path, "exec"), module.__dict__)  # noqa: S102 - the problem file is the input
    except ModuleNotFoundError as exc:
        raise ExportFailure("missing_package", f"needs the package {exc.name!r}, which is not installed") from None
    except Exception as exc:  # noqa: BLE001 - any failure of the file is its own
        raise ExportFailure("bad_file", f"executing the file raised {type(exc).__name__}: {exc}") from None
    for attr in ("Model", "get_inputs", "get_init_inputs"):
        if not callable(getattr(module, attr, None)):
            raise ExportFailure("bad_file", f"defines no {attr}")
    return module


def _instantiate(module):
    """(model in eval mode, inputs list, outputs tuple) of a loaded problem module."""
    import torch

    try:
        model = module.Model(*module.get_init_inputs())
        model.eval()
        inputs = list(module.get_inputs())
    except Exception as exc:  # noqa: BLE001
        raise ExportFailure("bad_file", f"Model(*get_init_inputs()) / get_inputs() raised {type(exc).__name__}: "
                                        f"{exc}") from None
    for k, t in enumerate(inputs):
        if not isinstance(t, torch.Tensor):
            raise ExportFailure("unsupported_input", f"get_inputs()[{k}] is a {type(t).__name__}, not a tensor")
        if str(t.dtype) not in _DTYPES:
            raise ExportFailure("unsupported_input", f"get_inputs()[{k}] has dtype {t.dtype} (the kit supports "
                                                     f"{', '.join(_DTYPES.values())})")
    with torch.no_grad():
        try:
            out = model(*inputs)
        except Exception as exc:  # noqa: BLE001
            raise ExportFailure("bad_file", f"forward raised {type(exc).__name__}: {exc}") from None
    outs = (out,) if isinstance(out, torch.Tensor) else tuple(out)
    for k, t in enumerate(outs):
        if not isinstance(t, torch.Tensor):
            raise ExportFailure("unsupported_output", f"forward's output {k} is a {type(t).__name__}, not a tensor")
    return model, inputs, outs


def _nbytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _meta_bytes(source: str, path: str) -> int:
    """Bytes of inputs + parameters + outputs, measured on the meta device (outputs 0 where forward fails)."""
    import torch

    with torch.device("meta"):
        module = _load(source, path)
        model = module.Model(*module.get_init_inputs())
        inputs = [t for t in module.get_inputs() if isinstance(t, torch.Tensor)]
        total = _nbytes(inputs) + _nbytes(model.state_dict().values())
        try:
            with torch.no_grad():
                out = model(*inputs)
            total += _nbytes((out,) if isinstance(out, torch.Tensor) else [t for t in out if isinstance(t, torch.Tensor)])
        except Exception:  # noqa: BLE001 - data-dependent ops have no meta kernel: count inputs and params only
            pass
    return total


def fit_budget(source: str, path: str, budget_bytes: int) -> tuple[str, dict[str, list[int]], int]:
    """(source scaled to ``budget_bytes``, {constant: [old, new]}, bytes); halves the largest scalable constant
    while over budget.  Raises ExportFailure("over_budget") when nothing is left to scale."""
    try:
        consts = scalable_constants(source)
    except SyntaxError as exc:
        raise ExportFailure("bad_file", f"syntax error: {exc}") from None
    values = dict(consts)
    current = source
    while True:
        try:
            size = _meta_bytes(current, path)
        except ExportFailure as exc:
            if exc.kind == "missing_package":
                raise
            return current, {}, -1  # fails on meta only or for real: the CPU run below tells which
        except Exception:  # noqa: BLE001 - no meta support (numpy inputs, ...): measured on the CPU later
            return current, {}, -1
        if size <= budget_bytes:
            return current, {k: [consts[k], values[k]] for k in consts if values[k] != consts[k]}, size
        shrink = [k for k in values if values[k] >= 2]
        if not shrink:
            raise ExportFailure("over_budget", f"inputs, parameters and outputs take {size} bytes, over the budget "
                                               f"of {budget_bytes}, and no module-level size constant is left to scale")
        big = max(shrink, key=lambda k: values[k])
        values[big] //= 2
        current = rewrite_constants(source, values)


def _names(model, n_inputs: int) -> list[str]:
    """Graph input names: forward's parameter names where they are identifiers, else x0, x1, ..."""
    try:
        params = [p for p in inspect.signature(model.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    names = [re.sub(r"\W", "_", p.name) for p in params][:n_inputs]
    if len(names) != n_inputs or len(set(names)) != n_inputs or any(not re.match(r"^[A-Za-z_]", n) for n in names):
        names = [f"x{k}" for k in range(n_inputs)]
    return names


def _stats(t) -> dict:
    """Value statistics of one sample input (float64 moments; kurtosis is the plain 4th standardized moment;
    distinct values are counted over the first 100 000 elements)."""
    import numpy as np

    a = t.detach().cpu().numpy()
    if a.dtype == np.bool_:
        return {"n": int(a.size), "true_fraction": float(a.mean()) if a.size else 0.0}
    f = a.astype(np.float64).ravel()
    if f.size == 0:
        return {"n": 0}
    mean, std = float(f.mean()), float(f.std())
    kurt = float(((f - mean) ** 4).mean() / std**4) if std > 0 else 0.0
    return {"n": int(f.size), "min": float(f.min()), "max": float(f.max()), "mean": mean, "std": std,
            "kurtosis": kurt, "n_unique_first_100k": int(np.unique(f[:100000]).size)}


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: " + (text.splitlines()[0][:300] if text else "")


def _export(model, inputs, path: Path, opset: int, in_names: list[str], out_names: list[str]) -> str:
    """Export with the TorchScript exporter; where it lacks the op, with torch.export's (dynamo) exporter.
    Returns which one wrote ``path``; raises ExportFailure("export_failed") naming both errors."""
    import torch

    try:
        torch.onnx.export(model, tuple(inputs), str(path), dynamo=False, opset_version=opset,
                          input_names=in_names, output_names=out_names, do_constant_folding=True)
        return "TorchScript exporter (dynamo=False)"
    except Exception as exc:  # noqa: BLE001
        first = _first_line(exc)
    try:
        torch.onnx.export(model, tuple(inputs), str(path), dynamo=True, opset_version=opset, input_names=in_names,
                          output_names=out_names, external_data=False, optimize=True, verbose=False)
        return f"torch.export-based exporter (dynamo=True; the TorchScript exporter failed: {first[:120]})"
    except Exception as exc:  # noqa: BLE001
        raise ExportFailure("export_failed", f"torch.onnx.export failed: TorchScript exporter: {first}; "
                                             f"dynamo exporter: {_first_line(exc)}") from None


def export(job: dict) -> dict:
    """Run the job (see the module docstring); returns the report's fields (raises ExportFailure)."""
    import numpy as np
    import torch

    torch.set_num_threads(1)
    path, out = job["problem"], Path(job["out_dir"])
    source = Path(path).read_text(encoding="utf-8")
    scaled_source, scaled, size = fit_budget(source, path, int(job["budget_bytes"]))
    torch.manual_seed(int(job.get("seed", 0)))
    model, inputs, outs = _instantiate(_load(scaled_source, path))
    if size < 0:
        size = _nbytes(inputs) + _nbytes(model.state_dict().values()) + _nbytes(outs)
        if size > int(job["budget_bytes"]):
            raise ExportFailure("over_budget", f"inputs, parameters and outputs take {size} bytes, over the budget "
                                               f"of {job['budget_bytes']} (not measurable on the meta device, so "
                                               "not scaled)")
    in_names = _names(model, len(inputs))
    base = next(n for n in ("y", "out", "output", "result", "mkb_out") if not any(i.startswith(n) for i in in_names))
    out_names = [base] if len(outs) == 1 else [f"{base}{k}" for k in range(len(outs))]
    (out / "model.py").write_text(scaled_source, encoding="utf-8")
    np.savez(out / "inputs.npz", **{n: t.numpy() for n, t in zip(in_names, inputs)})
    np.savez(out / "outputs.npz", **{n: t.detach().contiguous().numpy() for n, t in zip(out_names, outs)})
    np.savez(out / "params.npz", **{k: v.detach().cpu().numpy() for k, v in model.state_dict().items()})
    exporter = _export(model, inputs, out / "raw.onnx", int(job["opset"]), in_names, out_names)
    return {
        "inputs": [{"name": n, "dtype": _DTYPES[str(t.dtype)], "shape": list(t.shape), "stats": _stats(t)}
                   for n, t in zip(in_names, inputs)],
        "outputs": [{"name": n, "dtype": _DTYPES.get(str(t.dtype), str(t.dtype)), "shape": list(t.shape)}
                    for n, t in zip(out_names, outs)],
        "scaled": scaled, "measured_bytes": size, "torch": torch.__version__, "exporter": exporter,
    }


def main(argv: list[str]) -> int:
    job = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    try:
        report = {"ok": True, **export(job)}
    except ExportFailure as exc:
        report = {"ok": False, "kind": exc.kind, "error": str(exc)}
    except MemoryError:
        report = {"ok": False, "kind": "over_budget", "error": "out of memory under the export's memory limit"}
    except Exception as exc:  # noqa: BLE001 - any other failure is reported, with its last frame
        tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
        report = {"ok": False, "kind": "export_failed", "error": tb[:400]}
    print(json.dumps({"mkb_export": report}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
