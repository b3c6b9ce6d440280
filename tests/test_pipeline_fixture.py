"""The whole pipeline on the fixture engine: real cmake/ninja/g++, real swaps, compile errors and crashes.

One evaluation of the fixture sample set is shared by the tests of this module (the first build of the
engine takes a while); each test then checks one property of it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from kit.cli import main
from kit.job.worker import setup_worker
from kit.outline.evaluate import check, evaluate
from kit.results.records import Status
from kit.results.shards import done_job_ids, scan
from kit.settings.config import load_config
from kit.stages.verify import REVERIFY_SEED_OFFSET, SideModel, reverify_salt
from kit.suite.tasks import load_suite

pytestmark = pytest.mark.slow

EXPECTED = {
    "correct": Status.OK,
    "compile_error": Status.COMPILE_ERROR,
    "wrong_result": Status.VERIFY_MISMATCH,
    "crash": Status.RUNTIME_CRASH,
}


def write_config(tmp: Path, engine_src: Path, tasks_dir: Path, cands: Path, run_dir: Path, cache: Path) -> Path:
    cfg = tmp / "cfg.toml"
    cfg.write_text(
        f"""
[run]
dir = "{run_dir}"
[tasks]
dir = "{tasks_dir}"
split = "all"
[[candidates.sources]]
method = "sample"
path = "{cands}"
[mnn]
engine = "fixture"
source_dir = "{engine_src}"
cache_dir = "{cache}"
[build]
jobs = 2
[dispatch]
mode = "serial"
[verify]
trials = 3
[timing]
warmup = 1
iterations = 10
rounds = 2
"""
    )
    return cfg


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory, fixture_engine_pristine, fixture_tasks_dir, fixture_candidates_dir):
    tmp = tmp_path_factory.mktemp("pipeline")
    cands = tmp / "candidates"
    shutil.copytree(fixture_candidates_dir / "sample", cands)
    # rejected inputs: a traversal name, a file the task does not allow, an unknown task id
    bad = cands / "fx_argmax" / "bad_name"
    bad.mkdir()
    (bad / "CPUSoftmax.cpp").write_text("int x;\n")
    # candidate code that calls exit(0) or exit(2) inside onExecute: the runner's protocol breaks, the
    # candidate is at fault (runtime_crash), not the kit
    for code in (0, 2):
        d = cands / "fx_argmax" / f"exit{code}"
        shutil.copytree(fixture_candidates_dir / "sample" / "fx_argmax" / "correct", d)
        src = (d / "CPUArgMax.cpp").read_text()
        marker = "const Tensor* x = inputs[0];"
        assert marker in src
        (d / "CPUArgMax.cpp").write_text("#include <cstdlib>\n" + src.replace(marker, f"std::exit({code});\n    " + marker, 1))
    (cands / "no_such_task" / "s0").mkdir(parents=True)
    (cands / "no_such_task" / "s0" / "CPUArgMax.cpp").write_text("int x;\n")
    cfg_path = write_config(tmp, fixture_engine_pristine, fixture_tasks_dir, cands, tmp / "run", tmp / "cache")
    cfg = load_config(cfg_path)
    assert evaluate(cfg) == 0
    return cfg, cfg_path, tmp


def test_every_sample_has_its_expected_status(evaluated):
    cfg, _, _ = evaluated
    df = scan(cfg.run.dir).collect()
    got = {(r["task_id"], r["sample_id"]): r["status"] for r in df.iter_rows(named=True)}
    tasks = load_suite(cfg.tasks.dir)
    for t in tasks:
        for sample, status in EXPECTED.items():
            assert got[(t.id, sample)] == status.value, (t.id, sample, df.filter(
                (pl.col("task_id") == t.id) & (pl.col("sample_id") == sample)
            ).select("error_message").item())
    assert got[("fx_argmax", "bad_name")] == Status.REJECTED_INPUT.value
    assert got[("fx_argmax", "exit0")] == Status.RUNTIME_CRASH.value
    assert got[("fx_argmax", "exit2")] == Status.RUNTIME_CRASH.value
    assert got[("no_such_task", "s0")] == Status.REJECTED_INPUT.value


def test_one_record_per_job_and_fields(evaluated):
    cfg, _, _ = evaluated
    df = scan(cfg.run.dir).collect()
    assert df["job_id"].n_unique() == df.height
    assert set(df["config_digest"]) == {cfg.digest()}
    ok = df.filter(pl.col("status") == "ok")
    assert ok.height == 4
    n = cfg.timing.iterations * cfg.timing.rounds
    for r in ok.iter_rows(named=True):
        assert r["candidate_ms"] > 0
        # the trials at timing.threads, then the first extra_trials seeds again at each extra thread count; the
        # same again after timing, with seeds from verify.seed + 1000 + a number from the candidate's sha256
        again = cfg.verify.seed + REVERIFY_SEED_OFFSET + reverify_salt(r["candidate_sha256"])
        assert [(t["seed"], t["threads"]) for t in r["trials"]] == [
            (base + k, threads) for base in (cfg.verify.seed, again)
            for threads, n in ((cfg.timing.threads, cfg.verify.trials), (4, cfg.verify.extra_trials))
            for k in range(n)]
        assert all(t["ok"] for t in r["trials"])
        # stage times, and the conditions of the timing runs: the same cores, the same invocation on both sides
        assert all(r[k] > 0 for k in ("build_s", "convert_s", "verify_s", "timing_s", "wall_s"))
        assert r["timing_rounds"] == cfg.timing.rounds and len(r["timing_cores"]) == cfg.timing.threads
        assert r["candidate_samples_round"] == [k // cfg.timing.iterations for k in range(n)]
        assert r["host_load_1m"] is not None and len(r["candidate_invocation_sha256"]) == 64
        if r["task_id"] == "fx_sub":  # the engine has no native Sub converter: timed alone, no speedup
            assert r["error_kind"] == "no_native" and r["native_ms"] is None and r["speedup"] is None
            continue
        assert r["native_ms"] > 0 and r["native_invocation_sha256"] == r["candidate_invocation_sha256"]
        assert r["speedup"] == pytest.approx(r["native_ms"] / r["candidate_ms"])
        assert r["speedup_ci_low"] <= r["speedup"] <= r["speedup_ci_high"]
        assert len(r["candidate_samples_ms"]) == len(r["native_samples_round"]) == n
    ce = df.filter(pl.col("status") == "compile_error").row(0, named=True)
    assert ce["diagnostics"] and ce["diagnostics"][0]["severity"] in ("error", "fatal error", "linker")
    crash = df.filter((pl.col("status") == "runtime_crash") & (pl.col("error_kind") == "signal"))
    assert crash.height >= 1 and all(s == 11 for s in crash["signal"])


def test_workspace_is_pristine_after_the_run(evaluated):
    cfg, _, _ = evaluated
    worker = setup_worker(cfg)
    try:
        assert worker.workspace.check_and_repair() == []
    finally:
        worker.workspace.release()


def test_a_workspace_built_whole_is_neither_rebuilt_nor_checked_twice_at_set_up(evaluated):
    """After a run the workspace was built whole since its configure: a new worker's set-up repairs its sources
    but builds nothing (a job's restored files are left to the next candidate's build), and its first
    job does not check the sources again."""
    cfg, _, _ = evaluated
    worker = setup_worker(cfg)
    build = worker.workspace.build
    worker.workspace.release()
    assert worker.workspace.state()["built_whole"] is True
    # as a job's restore leaves it: a kernel source copied back, newer than its object (a whole build remakes it)
    task = next(t for t in load_suite(cfg.tasks.dir) if t.id == "fx_argmax")
    worker.workspace.restore_file(task.place("CPUArgMax.cpp"))
    before = {p: p.stat().st_mtime_ns for p in build.rglob("*") if p.is_file()}
    worker = setup_worker(cfg, index=int(worker.workspace.root.name[1:]))
    try:
        assert worker.workspace.checked_at_setup
        assert {p: p.stat().st_mtime_ns for p in build.rglob("*") if p.is_file()} == before
    finally:
        worker.workspace.release()


def test_second_run_is_resumed_without_new_jobs(evaluated):
    cfg, cfg_path, tmp = evaluated
    before = scan(cfg.run.dir).collect().height
    res = subprocess.run(
        [sys.executable, "-m", "kit.cli", "eval", "--config", str(cfg_path)], capture_output=True, text=True, timeout=600
    )
    assert res.returncode == 0, res.stderr
    assert "already recorded" in res.stdout and "CSR" in res.stdout
    assert (cfg.run.dir / "results.parquet").is_file() and (cfg.run.dir / "report" / "report.html").is_file()
    assert scan(cfg.run.dir).collect().height == before
    assert len(done_job_ids(cfg.run.dir)) == before


def test_a_candidate_edited_since_its_record_is_refused_naming_it(evaluated, capsys):
    """The job id covers the files' sha256: resuming with an edited candidate would evaluate it again beside
    its old record (two records of one sample, which scoring refuses), so the run is refused before any job."""
    cfg, cfg_path, tmp = evaluated
    cands = tmp / "candidates-edited"
    shutil.copytree(tmp / "candidates", cands)
    with (cands / "fx_argmax" / "correct" / "CPUArgMax.cpp").open("a") as f:
        f.write("// edited\n")
    edited = tmp / "edited.toml"
    edited.write_text(cfg_path.read_text().replace(f'path = "{tmp / "candidates"}"', f'path = "{cands}"'))
    assert str(cands) in edited.read_text()
    before = sorted(p.name for p in (cfg.run.dir / "shards").iterdir())
    capsys.readouterr()
    assert main(["eval", "--config", str(edited)]) == 2
    err = capsys.readouterr().err
    assert "1 sample(s)" in err and "sample/fx_argmax/correct" in err
    assert "another run.dir" in err and "Traceback" not in err
    assert sorted(p.name for p in (cfg.run.dir / "shards").iterdir()) == before
    # the same files as recorded resume as before
    assert main(["eval", "--config", str(cfg_path)]) == 0


def test_mkb_report_of_the_run_agrees_with_the_report_eval_wrote(evaluated):
    """Without --tasks-dir, mkb report takes the run's tasks.dir and task selection from its provenance.json:
    the same numbers as the report mkb eval wrote (the fixture suite is not ./tasks)."""
    cfg, _, tmp = evaluated
    assert main(["report", str(cfg.run.dir), "--out", str(tmp / "again")]) == 0
    ours = json.loads((tmp / "again" / "report.json").read_text())
    evals = json.loads((cfg.run.dir / "report" / "report.json").read_text())
    assert ours["summary"] and ours["summary"] == evals["summary"]


def test_check_prints_a_verdict(evaluated, fixture_candidates_dir):
    cfg, _, _ = evaluated
    d = fixture_candidates_dir / "sample" / "fx_argmax" / "compile_error"
    verdict = check(cfg, "fx_argmax", files=sorted(d.iterdir()))
    assert verdict["status"] == "compile_error"
    assert verdict["diagnostics"][0]["file"].endswith("CPUArgMax.cpp")
    json.dumps(verdict)  # JSON-able


def test_a_correctness_only_check_is_ok_but_not_timed_and_loads_no_timing_code(evaluated, fixture_candidates_dir):
    """`mkb check --no-timing` of a correct candidate: `ok`, built and verified, its verdict `not_timed` with no
    timing fields; the whole check, start-up included, never imports what only timing, shipping or Ray use."""
    _, cfg_path, _ = evaluated
    d = fixture_candidates_dir / "sample" / "fx_argmax" / "correct"
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "kit.cli", "check", "--config", str(cfg_path),
                          "--task", "fx_argmax", "--files", *map(str, sorted(d.iterdir())), "--no-timing"],
                         capture_output=True, text=True, timeout=600)
    verdict = json.loads(out.stdout)
    assert out.returncode == 0, out.stderr[-2000:]
    assert verdict["status"] == "ok" and verdict["timing"] == "not_timed"
    assert verdict["build_s"] is not None and verdict["verify_s"] is not None and verdict["trials"]
    assert verdict["timing_s"] is None and verdict["speedup"] is None and verdict["candidate_ms"] is None
    assert set(verdict["phases"]) >= {"setup_s", "build_s", "verify_s", "record_s"}
    assert verdict["phases"]["time_s"] is None and verdict["phases"]["build_s"] > 0
    # the phases are disjoint and cover the job: they add up to its wall_s (rounded to 0.1 ms each)
    assert sum(s for s in verdict["phases"].values() if s is not None) == pytest.approx(verdict["wall_s"], abs=0.01)
    imported = {line.split("|")[-1].strip().split(".")[0] for line in out.stderr.splitlines()
                if line.startswith("import time:")}
    assert imported and "kit" in imported
    assert not imported & {"scipy", "elftools", "ray"}, imported & {"scipy", "elftools", "ray"}


def test_check_rejects_response_without_files(evaluated, tmp_path):
    cfg, _, _ = evaluated
    resp = tmp_path / "r.md"
    resp.write_text("I cannot do that.")
    verdict = check(cfg, "fx_argmax", response=resp)
    assert verdict["status"] == "rejected_input" and verdict["error_kind"] == "parse"


def test_killed_job_leaves_workspace_repairable(evaluated, caplog):
    """SIGKILL a worker in the middle of a build: the next worker finds and repairs the dirty workspace (at its
    set-up, before its first build)."""
    cfg, cfg_path, tmp = evaluated
    code = (
        "import os, signal, sys\n"
        "from kit.settings.config import load_config\n"
        "from kit.job.worker import setup_worker\n"
        "from kit.mnn import register\n"
        "from kit.suite.tasks import load_suite\n"
        f"cfg = load_config({str(cfg_path)!r})\n"
        "w = setup_worker(cfg)\n"
        "t = [t for t in load_suite(cfg.tasks.dir) if t.id == 'fx_argmax'][0]\n"
        "register.apply(w.workspace, t, {'CPUArgMax.cpp': 'REGISTER_CPU_OP_CREATOR(CPUArgMaxCreator, OpType_ArgMax); garbage'})\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert res.returncode == -9
    with caplog.at_level("WARNING", logger="kit"):
        worker = setup_worker(cfg)
    try:
        assert any("restored 1 file(s)" in r.getMessage() and "source/backend/cpu/CPUArgMax.cpp" in r.getMessage()
                   for r in caplog.records), caplog.text
        rel = "source/backend/cpu/CPUArgMax.cpp"
        assert (worker.workspace.src / rel).read_bytes() == (worker.workspace.pristine.root / rel).read_bytes()
        assert worker.workspace.check_and_repair() == []
    finally:
        worker.workspace.release()


def test_next_owner_kills_what_a_killed_worker_left_running(evaluated, tmp_path):
    """A worker SIGKILLed mid-build leaves ninja's compilers (grandchildren in the build's process group)
    running; the next worker that takes the same workspace kills them before building there."""
    import os
    import time

    cfg, cfg_path, _ = evaluated
    gpid = tmp_path / "grandchild.pid"
    code = (
        "import os, signal, threading, time\n"
        "from kit.host import proc\n"
        "from kit.settings.config import load_config\n"
        "from kit.job.worker import setup_worker\n"
        f"w = setup_worker(load_config({str(cfg_path)!r}), index=0)\n"
        # like ninja: the "compiler" runs in a process group of its own inside the build's session
        f"cmd = ['sh', '-c', '{sys.executable} -c \\'import os, time; os.setpgid(0, 0); time.sleep(300)\\' & echo $! > {gpid}; wait']\n"
        "threading.Thread(target=proc.run, args=(cmd,), daemon=True).start()\n"
        f"while not os.path.exists({str(gpid)!r}) or not open({str(gpid)!r}).read().strip():\n"
        "    time.sleep(0.05)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert res.returncode == -9, res.stderr
    grandchild = int(gpid.read_text())
    os.kill(grandchild, 0)  # still running: its shell died with the worker, it did not
    end = time.monotonic() + 30  # and in a group of its own (not the recorded one) once it has run setpgid
    while os.getpgid(grandchild) != grandchild:
        assert time.monotonic() < end, "the grandchild never moved to a group of its own"
        time.sleep(0.05)
    worker = setup_worker(cfg, index=0)
    try:
        end = time.monotonic() + 30
        while Path(f"/proc/{grandchild}").exists() and "Z" not in Path(f"/proc/{grandchild}/stat").read_text().split()[2]:
            assert time.monotonic() < end, "the leftover compiler was not killed"
            time.sleep(0.05)
        assert list((worker.workspace.root / "procs").iterdir()) == []
    finally:
        worker.workspace.release()


def test_timing_holds_the_node_only_while_the_runners_run(evaluated, tmp_path, monkeypatch):
    """The exclusive timing phase covers the runs of the runners and nothing else: the runners start up (model
    loaded, inputs read) under the shared hold before it, the inputs (two sets) are drawn before both, the runs'
    symmetry checked before, and the timed outputs compared and the statistics computed after (all of that
    would otherwise idle the node's other cores); the node's turn to time is held around the batches only.  The inputs are written once, into the stage's own ``in``, and
    every run of both sides reads that directory, read-only where sandboxed."""
    from contextlib import contextmanager

    from kit.stages import timing as stiming

    cfg, _, _ = evaluated
    task = next(t for t in load_suite(cfg.tasks.dir, "all") if t.id == "fx_exp")
    events: list[tuple[str, str]] = []
    where = ["-"]

    def holder(name):
        @contextmanager
        def hold():
            where[0] = name
            try:
                yield
            finally:
                where[0] = "-"
        return hold

    def spy(name, real):
        def wrapped(*a, **k):
            events.append((name, where[0]))
            return real(*a, **k)
        monkeypatch.setattr(stiming, name, wrapped)

    for name in ("make_inputs", "start_run", "check_symmetric", "go_run", "check_timed_outputs", "_outcome"):
        spy(name, getattr(stiming, name))
    calls, spied_start = [], stiming.start_run

    def start_run(*a, **k):
        run = spied_start(*a, **k)
        calls.append(run.call)
        return run
    monkeypatch.setattr(stiming, "start_run", start_run)
    @contextmanager
    def turn():
        events.append(("turn", "taken"))
        yield
        events.append(("turn", "left"))

    worker = setup_worker(cfg, index=0)
    try:
        model = worker.native_models.model(task)
        assert model is not None
        side = worker.native_side
        tr = stiming.time_candidate(task, SideModel(model, side), SideModel(model, side), worker.timing,
                                    stiming.TimingSetup(worker.native.runner, tmp_path, hold=holder("exclusive"),
                                                        prepare=holder("shared"), turn=turn))
    finally:
        worker.workspace.release()
    runs = 2 * cfg.timing.rounds
    assert events == ([("make_inputs", "-")] * stiming.TIMED_SETS + [("turn", "taken")]
                      + [("start_run", "shared")] * runs + [("check_symmetric", "-")] + [("go_run", "exclusive")] * runs
                      + [("turn", "left"), ("check_timed_outputs", "-"), ("_outcome", "-")])
    assert len(tr.candidate_samples_ms) == len(tr.native_samples_ms) == cfg.timing.rounds * cfg.timing.iterations
    assert tr.speedup is not None and tr.speedup_ci_low <= tr.speedup <= tr.speedup_ci_high
    shared = str((tmp_path / "in").resolve())
    assert len(calls) == runs and {c.argv[2] for c in calls} == {shared}
    assert all(c.confine.view is None or shared in c.confine.view.ro for c in calls)
    assert not [c.scratch for c in calls if (c.scratch / "in").exists()]  # no run wrote inputs of its own


def test_calibrate_is_a_run_dir_of_its_own_and_summarizes_only_the_selected_tasks(evaluated, capsys):
    _, cfg_path, tmp = evaluated
    run = ["--run.dir", str(tmp / "cal")]
    assert main(["calibrate", "--config", str(cfg_path), *run, "--tasks.ids", '["fx_argmax","fx_exp"]']) == 0
    first = json.loads((tmp / "cal" / "calibration.json").read_text())
    assert sorted(r["task_id"] for r in first["tasks"]) == ["fx_argmax", "fx_exp"]
    # a second selection resumes the same calibration records but summarizes only its own tasks
    assert main(["calibrate", "--config", str(cfg_path), *run, "--tasks.ids", '["fx_exp"]']) == 0
    second = json.loads((tmp / "cal" / "calibration.json").read_text())
    assert [r["task_id"] for r in second["tasks"]] == ["fx_exp"]
    assert scan(tmp / "cal" / "calibration").collect().height == 2  # fx_exp was not timed again
    # other settings into the same calibration directory: refused like any run directory, nothing written
    capsys.readouterr()
    assert main(["calibrate", "--config", str(cfg_path), *run, "--timing.rounds", "3"]) == 2
    assert "timing.rounds (2 -> 3)" in capsys.readouterr().err
    assert scan(tmp / "cal" / "calibration").collect().height == 2
