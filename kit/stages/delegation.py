"""A flag for a candidate that hands its op to another op's kernel (a note for a reviewer, never a rejection).

A kernel scored against MNN's native one for op A can pass by running MNN's kernel of another op B that
computes A as a special case (ArgMax through TopK with K = 1, a reduction through a pooling): the speedup is then
MNN's work on another path, not the candidate's.  It is legitimate sometimes (a geometry task composes other
ops by design), so the kit flags it (code :data:`DELEGATES`) and the job goes on; the report lists every flag.

The evidence is read from the candidate's source text against the native files it replaces (what the native
kernel already does is not evidence), each kind on its own:

* an op type the native files never name (``OpType_TopKV2`` in an ArgMax kernel): an op of that type is built
  or matched;
* an Execution made through a backend (``backend()->onCreate(...)``, ``mBackend->onCreate(...)``): MNN's kernel
  of whatever op is passed runs inside the candidate's;
* a header of another CPU kernel (``CPUTopKV2.hpp``), but not of the CPU backend's shared utilities
  (:data:`UTILITY_HEADERS`), nor one of the candidate's own files.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from kit.results.records import Flag

#: flag code
DELEGATES = "delegates"

_OP_TYPE = re.compile(r"\bOpType_(\w+)")
_BACKEND_CREATE = re.compile(r"(?:->|\.)\s*onCreate\s*\(")
_KERNEL_HEADER = re.compile(r"^\s*#\s*include\s*[<\"](?:[\w./]*/)?(CPU\w+\.(?:hpp|h))[>\"]", re.MULTILINE)
#: headers of MNN 3.2.2's CPU backend (source/backend/cpu) that hold no op's kernel, or helpers many kernels share
UTILITY_HEADERS = frozenset({
    "CPUBackend.hpp", "CPURuntime.hpp", "CPUTensorConvert.hpp", "CPUResizeCache.hpp", "CPUFixedPoint.hpp",
    "CPUQuantizationUtils.hpp", "CPUCast.hpp",
})


def _op_types(texts: Mapping[str, str]) -> set[str]:
    return {m for text in texts.values() for m in _OP_TYPE.findall(text)}


def _kernel_headers(texts: Mapping[str, str]) -> set[str]:
    return {m for text in texts.values() for m in _KERNEL_HEADER.findall(text)}


def _creates_through_backend(texts: Mapping[str, str]) -> bool:
    return any(_BACKEND_CREATE.search(text) for text in texts.values())


def delegation_flags(files: Mapping[str, str], originals: Mapping[str, str]) -> list[Flag]:
    """The :data:`DELEGATES` flag of the candidate's ``files`` (basename → source text), or none.

    ``originals``: the native text of the files the candidate replaces (basename → text; empty for a file the
    candidate adds).  Returns one flag whose reason lists each kind of evidence found, at most one of each
    kind; an empty list when the candidate names no op type, creates no Execution through a backend and
    includes no kernel header that the native files do not, or when ``originals`` is empty (nothing to
    compare with: every op type a kernel registers would count)."""
    if not originals:
        return []
    evidence: list[str] = []
    new_types = sorted(_op_types(files) - _op_types(originals))
    if new_types:
        shown = ", ".join(f"OpType_{t}" for t in new_types[:6]) + (" ..." if len(new_types) > 6 else "")
        evidence.append(f"names op types the native kernel does not ({shown})")
    if _creates_through_backend(files) and not _creates_through_backend(originals):
        evidence.append("creates an Execution through a backend (onCreate)")
    headers = sorted(_kernel_headers(files) - _kernel_headers(originals) - UTILITY_HEADERS - set(files))
    if headers:
        evidence.append(f"includes another kernel's header ({', '.join(headers[:6])})")
    if not evidence:
        return []
    return [Flag(code=DELEGATES, reason="may hand its op to another op's kernel: " + "; ".join(evidence))]
