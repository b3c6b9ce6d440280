"""One TOML value writer for the files the kit writes itself (task.toml, observed.toml, the images' lock,
a bundle's reproduce.toml, the tests' configs): a scalar or a list of them as TOML text.  The kit only reads
TOML through the standard library (``tomllib``), which has no writer."""

from __future__ import annotations

import json
import math
import os
from typing import Any


def toml_value(v: Any) -> str:
    """``v`` as a TOML value: bool, int, float (non-finite ones as ``inf``/``-inf``/``nan``), str (a JSON string
    is a TOML basic string), a path (as its string), or a list/tuple of those.

    Raises:
        TypeError: any other type (a table is the caller's to write)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
        text = repr(v)
        return text if any(c in text for c in ".en") else text + ".0"
    if isinstance(v, os.PathLike):
        v = os.fspath(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    raise TypeError(f"no TOML value for {type(v).__name__}")
