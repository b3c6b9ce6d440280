"""The service's registry of checks (kit.serve.checks): which submissions the cache answers and which sample ids
are refused, whatever order concurrent submissions of one candidate arrive in."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kit.serve.checks import Check, Registry, SampleConflict

LANE = SimpleNamespace(digest="d" * 16)


def _accepted(reg: Registry, method: str, sample_id: str, sha256: str) -> Check:
    assert reg.known(LANE.digest, "fx_exp", sha256, method, sample_id) is None
    check = Check(f"id-{method}-{sample_id}", "fx_exp", method, sample_id, sha256, LANE)  # type: ignore[arg-type]
    reg.add(check)
    return check


def test_a_sample_id_answered_from_the_cache_still_names_its_candidate():
    # the same candidate sent under 'echo' first and as sample 'correct' second (the order two concurrent
    # clients may take): 'correct' is answered by the echo's check and is then this candidate's id
    reg = Registry(limit=8)
    first = _accepted(reg, "echo", "a1b2", "sha-correct")
    assert reg.known(LANE.digest, "fx_exp", "sha-correct", "sample", "correct") is first
    assert reg.cache_hits == 1
    with pytest.raises(SampleConflict, match="sample_id: sample/fx_exp/correct is already another candidate"):
        reg.known(LANE.digest, "fx_exp", "sha-crash", "sample", "correct")


def test_a_sample_id_of_another_candidate_is_refused_even_when_the_candidate_is_cached():
    reg = Registry(limit=8)
    _accepted(reg, "sample", "correct", "sha-correct")
    _accepted(reg, "sample", "crash", "sha-crash")
    with pytest.raises(SampleConflict, match="sample/fx_exp/crash"):
        reg.known(LANE.digest, "fx_exp", "sha-correct", "sample", "crash")
    assert reg.cache_hits == 0
    # the same candidate under its own sample id, and under a new one, is answered by its check
    assert reg.known(LANE.digest, "fx_exp", "sha-correct", "sample", "correct").sample_id == "correct"
    assert reg.known(LANE.digest, "fx_exp", "sha-correct", "sample", "again").sample_id == "correct"
    assert reg.cache_hits == 2
