"""The one map from the stages' outcomes to the record (kit.results.records.STAGE_FIELDS): every field of every
stage outcome is recorded or said not to be, every mapped name exists on both sides, and a job record carries
each mapped value."""

from __future__ import annotations

import dataclasses

from kit.results import outcomes
from kit.results.records import STAGE_FIELDS, STAGE_FIELDS_UNRECORDED, Record

STAGES = {"build": outcomes.BuildOutcome, "verify": outcomes.VerifyOutcome, "timing": outcomes.TimingOutcome}


def test_every_outcome_field_is_mapped_or_said_unrecorded():
    assert set(STAGE_FIELDS) == set(STAGES)
    for stage, cls in STAGES.items():
        fields = {f.name for f in dataclasses.fields(cls)}
        mapped = set(STAGE_FIELDS[stage].values())
        unrecorded = set(STAGE_FIELDS_UNRECORDED.get(stage, {}))
        assert fields - mapped - unrecorded == set(), f"{stage}: a field neither recorded nor said unrecorded"
        assert unrecorded - fields == set(), f"{stage}: an unrecorded name that is no field"
        properties = {n for n, v in vars(cls).items() if isinstance(v, property)}
        assert mapped - fields - properties == set(), f"{stage}: a mapped attribute the outcome lacks"


def test_every_mapped_record_field_exists_once():
    names = [name for fields in STAGE_FIELDS.values() for name in fields]
    assert len(names) == len(set(names))
    assert set(names) <= set(Record.model_fields)


def test_a_job_record_carries_each_timing_value():
    from kit.job.record import _results

    timing = outcomes.TimingOutcome(candidate_samples_ms=(1.0, 2.0), candidate_ms=1.5, native_ms=3.0, speedup=2.0,
                                    rounds=2, cores=(3,), governor="performance", native_timing="interleaved",
                                    baseline_key="k", timing_s=4.5)
    fields = _results(outcomes.Outcome(timing=timing))
    for name, attr in STAGE_FIELDS["timing"].items():
        value = getattr(timing, attr)
        assert fields[name] == (list(value) if isinstance(value, tuple) else value), name
