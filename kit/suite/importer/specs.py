"""The input specs of an imported task: dtype and shape from the sample ``get_inputs()`` gave, the value
distribution inferred from that sample's statistics (kept by default, for fidelity with the problem), and an
option to widen it.

Inference (:func:`infer_spec`), from the moments the export child measured:

* bool -> ``bool``; integers -> ``integers`` over the observed [min, max];
* floats whose values are all equal -> ``uniform`` [v, v] (a constant input: the audit will say whether a
  trivial kernel passes);
* plain kurtosis below 2.4 (uniform: 1.8) -> ``uniform`` over [min, max] snapped outward to a round step
  (``torch.rand`` gives [0, 1), ``2 * torch.rand - 1`` [-1, 1)); ``positive`` when the low end is > 0;
* otherwise -> ``normal`` with the measured mean and std, each taken as 0 / 1 when within three standard
  errors of them (``torch.randn``), else rounded to 2 decimals.

``widen=True`` makes float ranges symmetric around zero (uniform [-m, m) with m = max |bound|; a positive-only
normal keeps its std but mean 0) so that sign bugs show; integer and bool inputs stay (their range is often an
index range the model needs).
"""

from __future__ import annotations

import math

from kit.suite.tasks import TensorSpec

#: plain kurtosis below which a float sample is taken as uniform (uniform 1.8, normal 3.0)
UNIFORM_KURTOSIS_MAX = 2.4


def infer_spec(name: str, dtype: str, shape: list[int], stats: dict) -> tuple[TensorSpec, str]:
    """(spec, a one-line description of the evidence) for one sample input (stats: see export._stats)."""
    if dtype == "bool":
        return TensorSpec(name=name, shape=shape, dtype="bool", distribution="bool", low=0, high=1), \
            f"bool sample, {stats.get('true_fraction', 0):.2f} true"
    if stats.get("n", 0) == 0:
        raise ValueError(f"input {name}: empty sample tensor")
    lo, hi = stats["min"], stats["max"]
    if dtype in ("int32", "int64"):
        return TensorSpec(name=name, shape=shape, dtype=dtype, distribution="integers", low=lo, high=hi), \
            f"integers observed in [{lo:g}, {hi:g}]"
    if lo == hi:
        return TensorSpec(name=name, shape=shape, dtype=dtype, distribution="uniform", low=lo, high=hi), \
            f"constant {lo:g} in the sample"
    n = stats["n"]
    if stats["kurtosis"] < UNIFORM_KURTOSIS_MAX or n < 8:
        # snap outward to a round step: 1/10 of the range's decade (a tenth of that for samples of >= 1000)
        step = 10.0 ** (math.floor(math.log10(hi - lo)) - (1 if n >= 1000 else 0))
        low, high = round(math.floor(lo / step) * step, 6), round(math.ceil(hi / step) * step, 6)
        dist = "positive" if low > 0 else "uniform"
        return TensorSpec(name=name, shape=shape, dtype=dtype, distribution=dist, low=low, high=high), \
            f"uniform-like sample of {n} (kurtosis {stats['kurtosis']:.2f}) in [{lo:.4g}, {hi:.4g}]"
    mean, std = stats["mean"], stats["std"]
    # within three standard errors of the standard normal: taken as mean 0 / std 1
    mean = 0.0 if abs(mean) <= 3 * std / math.sqrt(n) else round(mean, 2)
    std = 1.0 if abs(std - 1) <= 3 / math.sqrt(2 * n) else (round(std, 2) or std)
    return TensorSpec(name=name, shape=shape, dtype=dtype, distribution="normal", low=mean, high=std), \
        f"normal-like sample of {n} (kurtosis {stats['kurtosis']:.2f}), mean {stats['mean']:.3g}, std {stats['std']:.3g}"


def widen(spec: TensorSpec) -> TensorSpec:
    """``spec`` with a float range symmetric around 0 (see the module docstring); others unchanged."""
    if spec.dtype != "float32" or spec.low == spec.high:
        return spec
    if spec.distribution == "normal":
        return spec.model_copy(update={"low": 0.0})
    m = max(abs(spec.low), abs(spec.high))
    return spec.model_copy(update={"distribution": "uniform", "low": -m, "high": m})


def is_positive_only(spec: TensorSpec) -> bool:
    """True when every value drawn from ``spec`` is >= 0 (a weak-input warning: sign bugs cannot show)."""
    if spec.dtype == "bool":
        return False
    if spec.distribution == "normal":
        return False
    return spec.low >= 0 and not math.isclose(spec.low, spec.high)
