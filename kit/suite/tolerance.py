"""A task's tolerance derived from independent references and its op's accumulation length (``mkb tasks tolerances``).

Per task (:func:`derive`), on the inputs verification draws (:func:`kit.suite.inputs.make_inputs`, seeds
:data:`SEEDS`):

1. The **truth**: the model in float64, from the first of torch (``model.py`` in double), onnx's
   ``ReferenceEvaluator`` and ONNX Runtime on a float64 copy of the graph that runs and agrees with ONNX Runtime's
   float32 outputs to 1 %.
2. The **float32 references**, each measured against the truth: ONNX Runtime (what verification compares with),
   torch (``model.py``) and ``onnx.reference`` (skipped where it is a pure-Python loop of seconds to minutes:
   :func:`kit.suite.checks.refeval_is_slow`; a reference of other output shapes is left out).  ``e``: the largest
   error of any of them relative to ``max(|truth|, median|truth != 0|)`` (an element's own magnitude, or the typical
   one for an element near zero, where a cancelling sum's error is absolute).
3. The tolerance (numpy.allclose semantics, ``|out - ref| <= atol + rtol |ref|``):

   - the floor ``u (C sqrt(K) + L)``: K is the op's accumulation length (:mod:`kit.suite.accumulation`),
     u = 2^-24 float32's unit roundoff.  The deterministic bound of a K-term sum is ``gamma_K = K u / (1 - K u)``
     relative to ``sum |x_i|`` (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., §3.1 and
     §4.2); it is reached only by adversarial data and gives 6 % at the suite's K = 2^20, so the floor takes the
     probabilistic bound ``lambda sqrt(K) u`` that rounding errors stay within with high probability (Higham and
     Mary, "A New Approach to Probabilistic Rounding Error Analysis", SIAM J. Sci. Comput. 41(5), 2019),
     C = :data:`C_SQRT_K`.  L = :data:`LIBRARY_ULPS` units for ops evaluated through a library function (exp,
     tanh, erf, ...): vectorized math libraries guarantee 1-4 ulp (SLEEF's u10/u35 functions, glibc's libmvec),
     not correct rounding.
   - ``rtol = max(floor, F e, R)``, F = :data:`SAFETY` (2 for a candidate and ONNX Runtime each erring as much
     as the worst reference, 2 for seeds not measured), R = :data:`IMPLEMENTATION_RTOL`;
     ``atol = max(rtol median|truth != 0|, A)``, A = :data:`IMPLEMENTATION_ATOL`: the first term carries the
     relative tolerance to outputs near zero without letting a few huge values (1/x near 0) widen it.
   - For ops a correct kernel may compute by a fast algorithm whose rounding error exceeds direct summation's
     (Winograd or Strassen convolution, LU with another pivoting for a determinant), atol is at least the
     allowance of :data:`ALGORITHM_ALLOWANCE`, relative to ``max|truth|``.

   Both are rounded up to two significant digits.  Every float32 reference then passes against ONNX Runtime (the
   derivation checks it, and widens atol to F times what one needs if not).  Integer and bool outputs are
   compared exactly: such a task's tolerance is not derived.

The reason written into ``task.toml`` names the references, the truth, K, the factors and the measured errors;
``paper_atol`` (:data:`kit.suite.tasks.PAPER_ATOL`) stays beside.  :func:`write` rewrites a task folder's
``[tolerance]`` table and its ``task.toml`` hash in the suite's manifest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from kit.suite.accumulation import accumulation_length
from kit.suite.compare import compare
from kit.suite.inputs import make_inputs
from kit.suite.tasks import Task

U32 = 2.0 ** -24
SAFETY = 4.0
C_SQRT_K = 8.0
LIBRARY_ULPS = 8.0
#: the least rtol and atol a task gets: the kit's tolerance before derivation.  Correct float32 kernels differ from
#: the references by more than the references differ from each other (polynomial exp/tanh, a reciprocal estimate
#: with one Newton step, sums reassociated for SIMD lanes: up to about 1e-5 relative; native MNN 3.2.2's Softmax errs
#: by 4.3e-6 on outputs of median 1.5e-4), so a derived tolerance only loosens where an op needs it (long sums, fast
#: algorithms) and never fails such a kernel.
IMPLEMENTATION_RTOL = 1e-4
IMPLEMENTATION_ATOL = 1e-4
SEEDS = (0, 1)
#: ops evaluated through a library function (not correctly rounded in vectorized libraries)
LIBRARY_OPS = frozenset({
    "Exp", "Log", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Tanh", "Asinh", "Acosh", "Atanh",
    "Erf", "Sigmoid", "Softplus", "Softsign", "Pow", "Elu", "Selu", "Celu", "Gelu", "Mish", "Softmax", "LogSoftmax",
    "ReduceLogSumExp", "ReduceLogSum", "ReduceL2", "LSTM", "GRU", "RNN", "STFT", "DFT", "LpNormalization",
    "Sqrt", "Reciprocal", "Div", "HardSwish", "ThresholdedRelu", "LayerNormalization", "InstanceNormalization",
    "GroupNormalization", "BatchNormalization", "MeanVarianceNormalization"})
#: op -> (fraction of max|truth|, why): the rounding error a correct fast algorithm may add
ALGORITHM_ALLOWANCE: dict[str, tuple[float, str]] = {
    "Conv": (2e-3, "Winograd and Strassen convolution round more than direct summation (Barabasz et al., 'Error "
                   "analysis and improving the accuracy of Winograd convolution for deep neural networks', ACM TOMS "
                   "46(4), 2020; Higham §23.2): native MNN 3.6.1 reaches 7.7e-4 x max|y| on the built-in "
                   "conv2d_no_bias_batch2"),
    "ConvTranspose": (2e-3, "ConvTranspose runs as a convolution (Winograd, Strassen GEMM): as Conv"),
    "Det": (2e-3, "another pivoting order changes LU's rounding and a near-singular matrix amplifies it "
                  "(Higham §14.6): native MNN 3.2.2 reaches 1.2e-3 x max|y| on det_batch_8x8's seed 3"),
}


@dataclass
class Derivation:
    """The derived tolerance of one task (None: not derived; ``note`` says why) and what it rests on."""

    task_id: str
    atol: float | None = None
    rtol: float | None = None
    k: int = 1
    k_how: str = ""
    truth: str = ""
    #: reference name -> largest error against the truth relative to max(|truth|, typical) (float outputs, seeds)
    errors: dict[str, float] = field(default_factory=dict)
    #: max|truth| and the median nonzero |truth| (the typical magnitude, robust to a few huge values: 1/x near 0)
    scale: float = 0.0
    typical: float = 0.0
    reason: str = ""
    note: str = ""


def _float64_model(model):  # noqa: ANN001 - onnx.ModelProto -> onnx.ModelProto
    """A copy of ``model`` with every float32 input, output, value, initializer and Cast target in float64."""
    import onnx
    from onnx import numpy_helper

    m = onnx.ModelProto()
    m.CopyFrom(model)
    f32, f64 = onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE
    for vi in [*m.graph.input, *m.graph.output, *m.graph.value_info]:
        if vi.type.tensor_type.elem_type == f32:
            vi.type.tensor_type.elem_type = f64
    for init in m.graph.initializer:
        if init.data_type == f32:
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float64), init.name))
    for node in m.graph.node:
        for a in node.attribute:
            if node.op_type == "Cast" and a.name == "to" and a.i == f32:
                a.i = f64
    return m


def _as64(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: v.astype(np.float64) if v.dtype == np.float32 else v for k, v in feeds.items()}


def _truths(task: Task, model, feeds):  # noqa: ANN001 - yields (name, callable -> outputs), best first
    from kit.suite.checks import refeval_is_slow, run_torch

    def refeval():
        from onnx.reference import ReferenceEvaluator

        outs = ReferenceEvaluator(_float64_model(model)).run(None, _as64(feeds))
        return dict(zip([o.name for o in task.outputs], outs))

    def ort():
        return run_ort_any(task, _float64_model(model), _as64(feeds))

    yield "torch float64", lambda: run_torch(task, model, feeds, float64=True)
    if not refeval_is_slow(task):
        yield "onnx.reference float64", refeval
    yield "ONNX Runtime float64", ort


def run_ort_any(task: Task, model, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:  # noqa: ANN001
    """ONNX Runtime's outputs of ``model`` (any dtype), run as verification runs its reference."""
    from kit.suite.reference import run_model

    return run_model(model, feeds, [o.name for o in task.outputs])


def _references(task: Task, model, feeds) -> dict[str, dict[str, np.ndarray]]:  # noqa: ANN001
    """Reference name -> float32 outputs: ONNX Runtime, torch, onnx.reference (those that run)."""
    from kit.suite.checks import refeval_is_slow, run_torch

    refs = {"ONNX Runtime": run_ort_any(task, model, feeds)}
    try:
        refs["torch"] = run_torch(task, model, feeds)
    except Exception:  # noqa: BLE001 - a reference that does not run is left out (the audit reports why)
        pass
    if not refeval_is_slow(task):
        try:
            from onnx.reference import ReferenceEvaluator

            outs = ReferenceEvaluator(model).run(None, feeds)
            refs["onnx.reference"] = dict(zip([o.name for o in task.outputs], outs))
        except Exception:  # noqa: BLE001 - as above
            pass
    ort = refs["ONNX Runtime"]  # a reference of other output shapes is wrong, not imprecise: left out
    return {r: outs for r, outs in refs.items()
            if all(n in outs and np.shape(outs[n]) == np.shape(ort[n]) for n in _float_names(task))}


def _float_names(task: Task) -> list[str]:
    return [o.name for o in task.outputs if o.dtype == "float32"]


def _truth(task: Task, model, feeds, ort32: dict[str, np.ndarray]) -> tuple[str, dict[str, np.ndarray] | None]:  # noqa: ANN001
    """The first float64 truth that runs and agrees with ONNX Runtime's float32 outputs within 1 %."""
    for name, run in _truths(task, model, feeds):
        try:
            outs = run()
        except Exception:  # noqa: BLE001 - the next candidate truth is tried
            continue
        if all(n in outs and compare(np.asarray(outs[n]), ort32[n], 1e-2, 1e-2).ok for n in _float_names(task)):
            return name, {n: np.asarray(outs[n], dtype=np.float64) for n in _float_names(task)}
    return "", None


def _scaled_err(out: np.ndarray, truth: np.ndarray, typical: float) -> float:
    """max |out - truth| / max(|truth|, typical) over the elements where both are finite (0.0 when none): the
    error relative to an element's magnitude, or to the typical magnitude for an element near zero."""
    with np.errstate(all="ignore"):
        t = np.asarray(truth, dtype=np.float64)
        e = np.abs(np.asarray(out, dtype=np.float64) - t) / np.maximum(np.abs(t), max(typical, 1e-30))
    e = e[np.isfinite(e)]
    return float(e.max()) if e.size else 0.0


def _ceil2(x: float) -> float:
    """``x`` rounded up to two significant digits (0 stays 0)."""
    if x <= 0:
        return 0.0
    e = math.floor(math.log10(x)) - 1
    m = math.ceil(round(x / 10 ** e, 9))
    return float(f"{m}e{e}")


def _measure(task: Task, model, d: Derivation) -> dict[str, dict[str, np.ndarray]]:  # noqa: ANN001
    """Fill ``d.errors`` (scaled: :func:`_scaled_err`), ``d.truth``, ``d.scale`` and ``d.typical`` over
    :data:`SEEDS`; returns the last seed's references."""
    refs: dict[str, dict[str, np.ndarray]] = {}
    for seed in SEEDS:
        feeds = make_inputs(task, seed)
        refs = _references(task, model, feeds)
        name, truth = _truth(task, model, feeds, refs["ONNX Runtime"])
        if truth is None:  # no float64 truth: the spread of the references around ONNX Runtime instead
            name, truth = "none (ONNX Runtime float32 as the centre)", {n: refs["ONNX Runtime"][n].astype(np.float64)
                                                                      for n in _float_names(task)}
        d.truth = d.truth or name
        for n in _float_names(task):
            finite = np.abs(truth[n][np.isfinite(truth[n])])
            if not finite.size:
                continue
            nonzero = finite[finite > 0]  # a ReLU's or a Trilu's zeros are exact: the magnitude is the others'
            d.scale, typical = max(d.scale, float(finite.max())), float(np.median(nonzero)) if nonzero.size else 1.0
            d.typical = max(d.typical, typical)
            for ref, outs in refs.items():
                d.errors[ref] = max(d.errors.get(ref, 0.0), _scaled_err(outs[n], truth[n], typical))
    return refs


def _reason(task: Task, d: Derivation, rtol_floor: float, allowance: float) -> str:
    errs = ", ".join(f"{r} {e:.2g}" for r, e in d.errors.items())
    lib = f" + {LIBRARY_ULPS:g} for a library function" if task.op_type in LIBRARY_OPS else ""
    parts = [f"derived (mkb tasks tolerances): float32 references' max error against the float64 truth "
             f"({d.truth}) relative to max(|y|, median|y != 0|), seeds {SEEDS[0]}-{SEEDS[-1]}: {errs}; "
             f"median|y != 0| {d.typical:.3g}, max|y| {d.scale:.3g}",
             f"accumulation length K = {d.k} ({d.k_how}): floor u ({C_SQRT_K:g} sqrt(K){lib}) = {rtol_floor:.2g}, "
             "u = 2^-24 (the probabilistic bound of a K-term sum, Higham & Mary 2019; the deterministic K u of "
             "Higham §3.1 is its worst case)",
             f"rtol = max(floor, {SAFETY:g} x the largest error, {IMPLEMENTATION_RTOL:g}: what correct float32 "
             f"kernels need), atol = max(rtol x median|y != 0|, {IMPLEMENTATION_ATOL:g})"]
    if allowance:
        frac, why = ALGORITHM_ALLOWANCE[task.op_type]
        parts.append(f"at least {frac:g} x max|y| = {allowance:.2g}: {why}")
    return "; ".join(parts)


def derive(task: Task) -> Derivation:
    """The derived tolerance of ``task`` (module docstring); a task without float outputs, or whose model ONNX
    Runtime cannot run, gets none (``note`` says why)."""
    import onnx

    d = Derivation(task.id)
    if not _float_names(task):
        d.note = "integer/bool outputs: compared exactly, tolerance unused"
        return d
    model = onnx.load(str(task.onnx_path))
    d.k, d.k_how = accumulation_length(task.op_type, model)
    d.k_how = d.k_how.split(": ", 1)[-1]
    try:
        refs = _measure(task, model, d)
    except Exception as exc:  # noqa: BLE001 - a task ONNX Runtime cannot run: the audit's to report
        d.note = f"not derived: {type(exc).__name__}: {str(exc)[:200]}"
        return d
    rtol_floor = U32 * (C_SQRT_K * math.sqrt(d.k) + (LIBRARY_ULPS if task.op_type in LIBRARY_OPS else 0.0))
    allowance = ALGORITHM_ALLOWANCE[task.op_type][0] * d.scale if task.op_type in ALGORITHM_ALLOWANCE else 0.0
    rtol = _ceil2(max(rtol_floor, SAFETY * max(d.errors.values(), default=0.0), IMPLEMENTATION_RTOL))
    atol = _ceil2(max(rtol * d.typical, allowance, IMPLEMENTATION_ATOL))
    ort = refs["ONNX Runtime"]
    for outs in refs.values():  # every reference passes against ONNX Runtime (by construction; checked)
        for n in _float_names(task):
            c = compare(outs[n], ort[n], atol, rtol)
            if not c.ok and c.max_abs_err is not None:
                atol = _ceil2(max(atol, SAFETY * c.max_abs_err))
    d.atol, d.rtol = atol, rtol
    d.reason = _reason(task, d, rtol_floor, allowance)
    return d


# ------------------------------------------------------------------------------------------ files
def tolerance_table(d: Derivation) -> dict:
    """The ``[tolerance]`` fields of a derived ``d`` (see :class:`kit.suite.tasks.Tolerance`)."""
    from kit.suite.tasks import PAPER_ATOL

    return {"atol": d.atol, "rtol": d.rtol, "reason": d.reason, "method": "derived", "accumulation_length": d.k,
            "paper_atol": PAPER_ATOL}


def _replace_table(text: str, table: str, body: list[str]) -> str:
    """``text`` (TOML) with the ``[table]`` header's keys replaced by ``body`` (added at the end if absent)."""
    lines = text.splitlines()
    try:
        start = lines.index(f"[{table}]")
    except ValueError:
        return text.rstrip("\n") + f"\n\n[{table}]\n" + "\n".join(body) + "\n"
    end = start + 1
    while end < len(lines) and not lines[end].startswith("["):
        end += 1
    while end > start + 1 and not lines[end - 1].strip():  # keep the blank line before the next table
        end -= 1
    return "\n".join([*lines[:start + 1], *body, *lines[end:]]) + "\n"


def write(task: Task, d: Derivation) -> bool:
    """Rewrite ``task``'s ``task.toml`` ``[tolerance]`` with the derived ``d`` and its sha256 in the suite's
    ``manifest.json`` (when it lists the task: :func:`kit.suite.listing.check_selected` then still passes); returns
    False when ``d`` holds no tolerance (nothing written).  The audit's marks stay: re-audit to renew them.

    Raises:
        kit.suite.tasks.TaskError: the rewritten file does not load."""
    import json

    from kit.settings.tomlvalue import toml_value
    from kit.suite.tasks import load_task, sha256_file

    if d.atol is None or task.path is None:
        return False
    path = task.path / "task.toml"
    body = [f"{k} = {toml_value(v)}" for k, v in tolerance_table(d).items()]
    path.write_text(_replace_table(path.read_text(encoding="utf-8"), "tolerance", body), encoding="utf-8")
    load_task(task.path)
    manifest = task.path.parent.parent / "manifest.json"
    if manifest.is_file():
        data = json.loads(manifest.read_text(encoding="utf-8"))
        for entry in data.get("tasks", []):
            if entry.get("id") == task.id and "task.toml" in entry.get("files", {}):
                entry["files"]["task.toml"] = sha256_file(path)
        tmp = manifest.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        tmp.rename(manifest)
    return True


def dumps_record(derivations: list[Derivation]) -> str:
    """``kit/suite/tolerances.toml`` text: the built-in suite's derived tolerances, which ``mkb tasks generate``
    writes into task.toml (the generator needs neither torch nor the minutes of a derivation)."""
    from kit.settings.tomlvalue import toml_value

    lines = ["# The built-in suite's derived tolerances (mkb tasks tolerances --dir tasks --record "
             "kit/suite/tolerances.toml; do not edit).", "# kit.suite.tolerance says how; mkb tasks generate uses them."]
    for d in sorted(derivations, key=lambda d: d.task_id):
        if d.atol is None:
            continue
        lines += ["", f"[{d.task_id}]", f"atol = {toml_value(d.atol)}", f"rtol = {toml_value(d.rtol)}",
                  f"accumulation_length = {d.k}", f"reason = {toml_value(d.reason)}"]
    return "\n".join(lines) + "\n"


def load_record(path=None) -> dict[str, dict]:  # noqa: ANN001 - a Path or None: the package's record
    """Task id -> {atol, rtol, accumulation_length, reason} of ``kit/suite/tolerances.toml`` (empty if absent)."""
    import tomllib
    from pathlib import Path

    p = Path(path) if path is not None else Path(__file__).with_name("tolerances.toml")
    return tomllib.loads(p.read_text(encoding="utf-8")) if p.is_file() else {}
