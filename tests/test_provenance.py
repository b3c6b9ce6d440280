"""kit.run.provenance: one file per run, first session on top, every session listed, changed keys named."""

from __future__ import annotations

import json

import pytest

from kit import report
from kit.host import machine as hostinfo
from kit.run import provenance
from kit.settings.config import EvalConfig


def _facts(cpu: str, started: str, **over) -> dict:
    base = {k: f"{k}-v" for k in provenance.SESSION_KEYS} | {"cpu_model": cpu, "started_at": started,
                                                            "threads": 1, "config": {"x": 1},
                                                            "container": {"mode": "container-v"}}
    return base | over


def _session(cpu: str, started: str, **over) -> provenance.Session:
    return provenance.Session.model_validate(_facts(cpu, started, **over))


def test_new_run_then_resumed_alike_then_on_another_cpu(tmp_path):
    first = _session("Xeon A", "2026-01-01T00:00:00+00:00")
    out = provenance.save(tmp_path, provenance.load(tmp_path), first)
    assert out.cpu_model == "Xeon A" and len(out.sessions) == 1 and "differs" not in out.dump()
    assert provenance.load(tmp_path) == out

    # resumed on the same kind of node: one more session, nothing differs, the top level is the first's
    again = provenance.save(tmp_path, provenance.load(tmp_path), _session("Xeon A", "2026-01-02T00:00:00+00:00"))
    assert [s.started_at for s in again.sessions] == ["2026-01-01T00:00:00+00:00", "2026-01-02T00:00:00+00:00"]
    assert again.started_at == "2026-01-01T00:00:00+00:00" and "differs" not in again.dump()

    # resumed on another CPU with other threads: both keys named, one value per session
    third = provenance.save(tmp_path, provenance.load(tmp_path),
                            _session("Graviton 3", "2026-01-03T00:00:00+00:00", threads=4))
    assert third.differs == {"cpu_model": ["Xeon A", "Xeon A", "Graviton 3"], "threads": [1, 1, 4]}
    assert third.cpu_model == "Xeon A"
    shown = report.load_provenance(tmp_path)
    assert shown["cpu_model"] == "Xeon A | Graviton 3 (differs between sessions)"
    assert shown["threads"] == "1 | 4 (differs between sessions)"
    assert shown["compiler"] == "compiler-v"


def test_saving_again_within_a_session_replaces_its_entry_not_adds_one(tmp_path):
    """The distributed driver saves as timing workers join: same ``previous``, growing ``current``."""
    before = provenance.save(tmp_path, None, _session("A", "t1"))
    cur = _session("A", "t2")
    provenance.save(tmp_path, before, cur)
    cur.dispatch = provenance.Dispatch(timing_workers=[provenance.TimingNode(name="n1.t0")])
    out = provenance.save(tmp_path, before, cur)
    assert len(out.sessions) == 2 and out.sessions[1].dump()["dispatch"]["timing_workers"] == [{"name": "n1.t0"}]
    assert not list(tmp_path.glob("*.tmp"))


def test_file_from_before_sessions_were_kept_becomes_the_first_session(tmp_path):
    (tmp_path / provenance.FILE).write_text(json.dumps(_facts("A", "t0")))
    out = provenance.save(tmp_path, provenance.load(tmp_path), _session("B", "t1"))
    assert [s.cpu_model for s in out.sessions] == ["A", "B"] and out.differs["cpu_model"] == ["A", "B"]


@pytest.mark.parametrize("text", ["[1, 2]", "{not json"])
def test_bad_file_is_a_clear_error(tmp_path, text):
    (tmp_path / provenance.FILE).write_text(text)
    with pytest.raises(provenance.ProvenanceError, match="provenance.json"):
        provenance.load(tmp_path)


def test_collect_names_this_session(tmp_path):
    cfg = EvalConfig(run={"dir": tmp_path / "run"}, mnn={"cache_dir": tmp_path / "c"})
    got = provenance.collect(cfg, None)
    assert set(provenance.SESSION_KEYS) <= set(got.dump()) and got.config_digest == cfg.digest()
    assert got.compiler == "unknown" and got.cpu_model == hostinfo.cpu_model()


def test_a_key_a_session_did_not_record_is_not_a_difference(tmp_path):
    old = _facts("A", "t0")
    del old["mnn_version"]
    (tmp_path / provenance.FILE).write_text(json.dumps(old))
    out = provenance.save(tmp_path, provenance.load(tmp_path), _session("A", "t1"))
    assert "differs" not in out.dump() and [s.mnn_version for s in out.sessions] == [None, "mnn_version-v"]
    third = provenance.save(tmp_path, out, _session("A", "t2", mnn_version="9.9"))
    assert third.differs == {"mnn_version": [None, "mnn_version-v", "9.9"]}
    assert report.load_provenance(tmp_path)["mnn_version"] == "mnn_version-v | 9.9 (differs between sessions)"

