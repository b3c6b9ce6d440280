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


def test_files_of_older_kits_load_and_are_written_back_as_they_were(tmp_path):
    """No ``sessions`` key (one session at the top level, no task selection): its config's tasks stand in;
    a ``sessions`` list whose first session has no ``tasks``: the same, the later session's own selection."""
    path = tmp_path / provenance.FILE
    config = {"tasks": {"split": "test", "ids": ["x"], "dir": "tasks"}}
    before_sessions = {k: v for k, v in _facts("A", "t0").items() if k != "container"} | {"config": config}
    path.write_text(json.dumps(before_sessions))
    prov = provenance.load(tmp_path)
    assert prov.sessions is None and prov.tasks is None and prov.host is None and prov.container is None
    assert prov.dump() == before_sessions
    assert [s.dump() for s in provenance.task_selections(prov)] == [{"split": "test", "ids": ["x"], "dir": "tasks"}]
    out = provenance.save(tmp_path, prov, _session("A", "t1", tasks={"split": "test", "ids": ["x", "y"]}))
    written = json.loads(path.read_text())
    assert {k: written[k] for k in before_sessions} == before_sessions and written == out.dump()
    assert written["sessions"][0] == {k: v for k, v in before_sessions.items() if k in provenance.ENTRY_KEYS}
    assert [s.ids for s in provenance.task_selections(out)] == [["x"], ["x", "y"]]

    no_tasks = {k: v for k, v in _facts("A", "t0").items() if k in provenance.ENTRY_KEYS}
    later = no_tasks | {"started_at": "t1", "tasks": {"split": "all", "ids": []}}
    older = no_tasks | {"config": config, "sessions": [no_tasks, later]}
    path.write_text(json.dumps(older))
    prov = provenance.load(tmp_path)
    assert prov.sessions[0].tasks is None and prov.dump() == older
    assert [(s.split, s.ids) for s in provenance.task_selections(prov)] == [("test", ["x"]), ("all", [])]
    provenance.note_selection(tmp_path, EvalConfig(run={"dir": tmp_path}, mnn={"cache_dir": tmp_path / "c"},
                                                   tasks={"split": "test", "ids": ["x"]}))
    assert json.loads(path.read_text()) == older  # that selection is known: nothing written
    provenance.note_selection(tmp_path, EvalConfig(run={"dir": tmp_path}, mnn={"cache_dir": tmp_path / "c"},
                                                   tasks={"split": "train"}))
    written = json.loads(path.read_text())
    assert {k: written[k] for k in older} == older and written[provenance.EXTRA_SELECTIONS][0]["split"] == "train"


def test_unknown_keys_are_kept_and_written_back_unchanged(tmp_path):
    path = tmp_path / provenance.FILE
    entry = {k: v for k, v in _facts("A", "t0").items() if k in provenance.ENTRY_KEYS} | {
        "later_fact": [1, 2.5, None],
        "tasks": {"split": "all", "ids": [], "weights": {"a": 1}},
        "host": {"cpu_model": "A", "cpus": 2, "numa_nodes": 1},
        "container": {"mode": "docker", "image_id": "sha256:1", "runtime": "runc"},
        "baselines": {"key": "k", "dir": "/nowhere", "extra": {"x": True}},
        "dispatch": {"mode": "ray", "placement": "spread",
                     "timing_workers": [{"name": "n1.t0", "cpu_model": "B", "numa": 0}]},
        "kit": {"version": "1", "commit": None, "dirty": None, "branch": "main"},
    }
    data = entry | {"config": {"x": 1}, "sessions": [entry], "future": {"a": "b"},
                    provenance.EXTRA_SELECTIONS: [{"split": "test", "ids": ["y"], "why": "resumed"}]}
    path.write_text(json.dumps(data))
    prov = provenance.load(tmp_path)
    assert prov.dump() == data and prov.model_extra == {"later_fact": [1, 2.5, None], "future": {"a": "b"}}
    assert prov.container.image_id == "sha256:1" and prov.dispatch.timing_workers[0].cpu_model == "B"
    out = provenance.save(tmp_path, prov, _session("A", "t1"))
    written = json.loads(path.read_text())
    assert written == out.dump() and {k: written[k] for k in data if k != "sessions"} == {
        k: v for k, v in data.items() if k != "sessions"}
    assert written["sessions"][0] == entry and len(written["sessions"]) == 2


@pytest.mark.parametrize(("data", "where"), [({"threads": "4"}, "threads"),
                                             ({"sessions": [{"tasks": {"ids": "x"}}]}, "sessions.0.tasks.ids"),
                                             ({"differs": {"threads": 4}}, "differs.threads")])
def test_a_known_key_of_the_wrong_type_is_a_damaged_file(tmp_path, data, where):
    (tmp_path / provenance.FILE).write_text(json.dumps(data))
    with pytest.raises(provenance.ProvenanceError, match=f"provenance.json: '{where}': .*move the file away"):
        provenance.load(tmp_path)
