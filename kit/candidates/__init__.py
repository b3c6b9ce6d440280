"""Candidates: the files one LLM sample produced for one task, parsed and checked against the task's allowlist.

Layers, each importing only those before it:

- :mod:`~kit.candidates.model`: :class:`Candidate`, :class:`Rejection`, hashes, constants, errors;
- :mod:`~kit.candidates.parse`: raw LLM response → named files (:func:`parse_response`);
- :mod:`~kit.candidates.allowlist`: the checks of names, sizes and UTF-8 (:func:`make_candidate`,
  :func:`candidate_from_response`);
- :mod:`~kit.candidates.sources`: directory and JSONL sources (:func:`load_candidates`) and the
  native candidate (:func:`native_candidate`).
"""

from kit.candidates.allowlist import candidate_from_response, check_files, make_candidate
from kit.candidates.model import (
    NAME_RE,
    NATIVE_METHOD,
    SAMPLE_ID_RE,
    Candidate,
    CandidateOrRejection,
    CandidateSourceError,
    Rejection,
    files_sha256,
)
from kit.candidates.parse import CODE_LANGS, ParsedResponse, parse_response
from kit.candidates.sources import load_candidates, native_candidate

__all__ = [
    "CODE_LANGS",
    "NAME_RE",
    "NATIVE_METHOD",
    "SAMPLE_ID_RE",
    "Candidate",
    "CandidateOrRejection",
    "CandidateSourceError",
    "ParsedResponse",
    "Rejection",
    "candidate_from_response",
    "check_files",
    "files_sha256",
    "load_candidates",
    "make_candidate",
    "native_candidate",
    "parse_response",
]
