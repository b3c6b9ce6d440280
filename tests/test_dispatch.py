"""kit.dispatch on a real multi-node Ray cluster on loopback: every job recorded exactly once, placement by
custom resource, node-exclusive timing through the NodeLock, actor death → retry / worker_lost.

The cluster (``tests/raycluster.py``, one module-scoped start): a head with 2 CPUs and resource ``x86`` and a
second node with 2 CPUs and resource ``aarch64``, both raylets on 127.0.0.1.  Run inside a private network
namespace::

    unshare -n sh -c 'ip link set lo up; .venv/bin/pytest tests/test_dispatch.py -q'

The jobs' *work* here is a module-level job function (injected through ``RayExecutor(job_fn=...)``)
that really sleeps, takes the node gate, writes files and kills its own actor process with ``os._exit``;
the scheduling, retry, shard and placement mechanics exercised are the production ones.  The end-to-end
test through :func:`kit.job.pipeline.run_job` on the fixture engine is ``test_end_to_end_fixture_engine``.
Jobs run the way ``mkb eval`` runs them: :func:`kit.outline.evaluate.execute` (the resume set, then the executor) on
a :class:`kit.dispatch.RayExecutor` (:func:`run_distributed` below).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
import ray
from conftest_fixture import fixture_config_text
from raycluster import STARTUP_S

from kit.dispatch.actors import DEFAULT_JOB, DEFAULT_SETUP, DEFAULT_TIME
from kit.host.nodelock import NodeLock
from kit.job.record import Job
from kit.results.records import CORRECT, Record, Status
from kit.results.shards import scan
from kit.run.plan import Executed, make_jobs
from kit.settings.config import EvalConfig
from kit.suite.tasks import load_suite

pytestmark = pytest.mark.slow

FIXTURE_ROOT = Path(__file__).resolve().parent / "fixture_engine"


# -- the injected per-actor setup and per-job work (module level: pickled by value into the actors) ----------
def setup_state(cfg: EvalConfig, index: int, name: str) -> dict:
    """Per actor: its name, the node gate in the (node-shared) cache dir, and a node-local workspace lock."""
    import fcntl

    node_dir = cfg.mnn.cache_dir / name.split(".")[0]
    node_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(node_dir / f"w{index}.lock", os.O_CREAT | os.O_RDWR, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises if another live actor holds w<index> on this node
    return {"name": name, "gate": NodeLock(cfg.mnn.cache_dir / "node.lock"), "dir": cfg.mnn.cache_dir, "fd": fd}


def _log_phase(state: dict, job: Job, phase: str, t0: int, t1: int) -> None:
    line = f"{state['name']} {job.job_id} {phase} {t0} {t1}\n"
    fd = os.open(state["dir"] / "phases.log", os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def work(job: Job, state: dict) -> Record:
    """The job's behaviour is chosen by its sample id prefix:

    ``ok``: sleep 0.2 s; ``die1``: kill the own actor process on the first try only (a marker file
    remembers the try); ``dieall``: kill it on every try; ``gate``: a 0.3 s "build" holding the gate
    shared, then a 0.3 s "timing" holding it exclusive, each phase logged as (start, end) monotonic ns.
    """
    kind = job.sample_id.split("-")[0]
    started = datetime.now(UTC).isoformat(timespec="microseconds")
    if kind == "die1":
        marker = state["dir"] / f"{job.job_id}.tried"
        if not marker.exists():
            marker.write_text(state["name"])
            os._exit(17)
    elif kind == "dieall":
        os._exit(17)
    elif kind == "raise":
        raise RuntimeError(f"job function bug in {job.sample_id}")
    elif kind == "gate":
        with state["gate"].shared():
            t0 = time.monotonic_ns()
            time.sleep(0.3)
            t1 = time.monotonic_ns()
            _log_phase(state, job, "build", t0, t1)
        with state["gate"].exclusive():
            t0 = time.monotonic_ns()
            time.sleep(0.3)
            t1 = time.monotonic_ns()
            _log_phase(state, job, "timing", t0, t1)
    else:
        time.sleep(0.2)
    t = job.task
    return Record(
        job_id=job.job_id, method=job.method, task_id=t.id, sample_id=job.sample_id,
        candidate_sha256=job.candidate_sha256, config_digest=job.config_digest, category=t.category,
        status=Status.OK, host=socket.gethostname(), worker=state["name"], started_at=started,
    )


# -- helpers ------------------------------------------------------------------------------------------------
def run_distributed(cfg: EvalConfig, jobs: list[Job], run_dir: Path, *, setup_fn=DEFAULT_SETUP, job_fn=DEFAULT_JOB,
                    time_fn=DEFAULT_TIME) -> Executed:
    """The middle of ``mkb eval``'s outline on Ray: skip what ``run_dir`` has recorded, run the rest."""
    from kit.dispatch import RayExecutor
    from kit.outline.evaluate import execute
    from kit.results.shards import done_job_ids

    executor = RayExecutor(cfg, setup_fn=setup_fn, job_fn=job_fn, time_fn=time_fn)
    return execute(jobs, done_job_ids(run_dir), run_dir, executor)


def _cfg(tmp: Path, **dispatch) -> EvalConfig:
    return EvalConfig(
        run={"dir": tmp / "run"},
        tasks={"dir": FIXTURE_ROOT / "tasks", "split": "all"},
        mnn={"cache_dir": tmp / "cache", "engine": "fixture"},
        dispatch={"mode": "ray", **dispatch},
    )


def _jobs(cfg: EvalConfig, samples: list[str]) -> list[Job]:
    tasks = load_suite(cfg.tasks.dir, "all")
    out = []
    for i, s in enumerate(samples):
        t = tasks[i % len(tasks)]
        sha = hashlib.sha256(f"{t.id}/{s}".encode()).hexdigest()
        out.append(Job(t, "m", s, sha, cfg.digest(), files={}))
    return out


def _records(run_dir: Path) -> list[dict]:
    return scan(run_dir, dedupe=False).collect().to_dicts()


def _kill_node_after_first_record(node: subprocess.Popen, run_dir: Path) -> threading.Thread:
    """A started thread that SIGKILLs the raylet ``node`` (its whole process group) once the first shard
    is in ``run_dir``; join it after the run."""

    def kill() -> None:
        end = time.monotonic() + STARTUP_S
        while not list((run_dir / "shards").glob("*.parquet")) and time.monotonic() < end:
            time.sleep(0.1)
        os.killpg(node.pid, signal.SIGKILL)

    killer = threading.Thread(target=kill, daemon=True)
    killer.start()
    return killer


def _node_of(worker: str, nodes: set[str]) -> str:
    """The node id whose first 8 hex digits the worker name ``n<8 hex>.w<i>`` carries."""
    prefix = worker.split(".")[0][1:]
    match = [n for n in nodes if n.startswith(prefix)]
    assert len(match) == 1, (worker, nodes)
    return match[0]


# -- tests --------------------------------------------------------------------------------------------------
def test_every_job_once_and_placement_by_resource(cluster, tmp_path):

    cfg = _cfg(tmp_path, workers=4, timing_resource="aarch64")
    jobs = _jobs(cfg, [f"ok-{i}" for i in range(10)])
    counts = run_distributed(cfg, jobs, cfg.run.dir, setup_fn=setup_state, job_fn=work)
    assert {k: getattr(counts, k) for k in ("jobs", "skipped", "ran", "workers")} == {
        "jobs": 10, "skipped": 0, "ran": 10, "workers": 2}  # 4 asked, 2 CPUs carry aarch64
    assert counts.work_s > 0
    rows = _records(cfg.run.dir)
    assert sorted(r["job_id"] for r in rows) == sorted(j.job_id for j in jobs)  # each exactly once
    assert all(r["status"] == "ok" and r["attempts"] == 1 for r in rows)
    all_nodes = cluster["arm_nodes"] | cluster["x86_nodes"]
    ran_on = {_node_of(r["worker"], all_nodes) for r in rows}
    assert ran_on <= cluster["arm_nodes"]
    # shards are named after the actor that produced them
    shard_workers = {p.name.rsplit("-", 1)[0] for p in (cfg.run.dir / "shards").glob("*.parquet")}
    assert shard_workers == {r["worker"] for r in rows}
    prov = json.loads((cfg.run.dir / "provenance.json").read_text())
    assert prov["dispatch"]["timing_resource"] == "aarch64"

    # the same command again: everything is already recorded, nothing runs
    again = run_distributed(cfg, jobs, cfg.run.dir, setup_fn=setup_state, job_fn=work)
    assert again.ran == 0 and again.skipped == 10
    assert len(_records(cfg.run.dir)) == 10


def test_timing_exclusive_per_node(cluster, tmp_path):
    """Two actors on the x86 head share one cache dir: no timing phase overlaps any other job's phase."""

    cfg = _cfg(tmp_path, workers=2, timing_resource="x86")
    jobs = _jobs(cfg, [f"gate-{i}" for i in range(8)])
    run_distributed(cfg, jobs, cfg.run.dir, setup_fn=setup_state, job_fn=work)
    rows = _records(cfg.run.dir)
    assert len(rows) == 8
    workers = {r["worker"] for r in rows}
    assert {_node_of(w, cluster["x86_nodes"] | cluster["arm_nodes"]) for w in workers} <= cluster["x86_nodes"]
    phases = [line.split() for line in (cfg.mnn.cache_dir / "phases.log").read_text().splitlines()]
    assert len(phases) == 16
    assert len({p[0] for p in phases}) == 2, "both actors must have run jobs, else the test proves nothing"
    for name, job_id, phase, t0, t1 in phases:
        if phase != "timing":
            continue
        for other in phases:
            if other[1] == job_id:
                continue
            o0, o1 = int(other[3]), int(other[4])
            assert int(t1) <= o0 or o1 <= int(t0), f"timing of {name}/{job_id} overlaps {other}"


def test_actor_death_retry_and_worker_lost(cluster, tmp_path):

    cfg = _cfg(tmp_path, workers=2, timing_resource="aarch64", max_retries=1)
    jobs = _jobs(cfg, ["die1-a", "ok-1", "dieall-b", "ok-2", "raise-d", "ok-3", "die1-c"])
    counts = run_distributed(cfg, jobs, cfg.run.dir, setup_fn=setup_state, job_fn=work)
    assert counts.ran == 7
    rows = _records(cfg.run.dir)
    by_sample = {r["sample_id"]: r for r in rows}
    assert len(rows) == 7 and set(by_sample) == {j.sample_id for j in jobs}  # none lost, none doubled
    bug = by_sample["raise-d"]
    assert bug["status"] == Status.HARNESS_ERROR.value and bug["attempts"] == 1
    assert "job function bug in raise-d" in bug["error_message"]
    for s in ("die1-a", "die1-c"):
        assert by_sample[s]["status"] == "ok" and by_sample[s]["attempts"] == 2
    lost = by_sample["dieall-b"]
    assert lost["status"] == Status.WORKER_LOST.value and lost["attempts"] == 2
    assert "died" in lost["error_message"]
    for s in ("ok-1", "ok-2", "ok-3"):
        assert by_sample[s]["status"] == "ok" and by_sample[s]["attempts"] == 1


def test_setup_error_aborts_with_its_type(cluster, tmp_path):
    """A worker whose setup raises ends the run with that exception (the CLI prints it): its own message,
    not Ray's wrapper whose message is the remote traceback; every job of the run is recorded once as a
    harness_error with that message (a rerun retries them)."""

    cfg = _cfg(tmp_path, workers=1, timing_resource="aarch64")
    jobs = _jobs(cfg, ["ok-1", "ok-2"])
    with pytest.raises(FileNotFoundError, match="no such tree") as ei:
        run_distributed(cfg, jobs, cfg.run.dir, setup_fn=failing_setup, job_fn=work)
    assert str(ei.value) == f"{cfg.mnn.cache_dir}/no such tree"
    assert any("setup of Ray worker slot w0" in note for note in getattr(ei.value, "__notes__", []))
    recs = _records(cfg.run.dir)
    assert sorted(r["job_id"] for r in recs) == sorted(j.job_id for j in jobs)
    assert {(r["status"], r["error_kind"], r["error_message"], r["worker"]) for r in recs} == {
        ("harness_error", "setup", f"{cfg.mnn.cache_dir}/no such tree", "w0")}


def failing_setup(cfg: EvalConfig, index: int, name: str) -> dict:
    raise FileNotFoundError(f"{cfg.mnn.cache_dir}/no such tree")


def failing_native_build(cfg: EvalConfig, index: int, name: str) -> dict:
    from kit.mnn.native import NativeBuildError

    raise NativeBuildError("native MNN build failed: ccache: error: x: Read-only file system; fix it",
                           cfg.mnn.cache_dir / "build-failed.log")


def test_a_native_build_error_reaches_the_driver_with_its_cause(cluster, tmp_path):
    """The one-line cause and the log's path survive Ray's pickling; every job's record carries the line."""
    from kit.mnn.native import NativeBuildError

    cfg = _cfg(tmp_path, workers=1, timing_resource="aarch64")
    jobs = _jobs(cfg, ["ok-1", "ok-2", "ok-3"])
    with pytest.raises(NativeBuildError) as ei:
        run_distributed(cfg, jobs, cfg.run.dir, setup_fn=failing_native_build, job_fn=work)
    line = "native MNN build failed: ccache: error: x: Read-only file system; fix it"
    assert ei.value.cause == line and ei.value.log == cfg.mnn.cache_dir / "build-failed.log"
    assert str(ei.value).splitlines()[0] == line
    recs = _records(cfg.run.dir)
    assert len(recs) == 3 and {(r["status"], r["error_message"]) for r in recs} == {("harness_error", line)}


def test_missing_timing_resource_is_a_clear_error(cluster, tmp_path):
    from kit.dispatch import DispatchError

    cfg = _cfg(tmp_path, timing_resource="riscv64")
    with pytest.raises(DispatchError, match="dispatch.timing_resource.*riscv64"):
        run_distributed(cfg, _jobs(cfg, ["ok-1"]), cfg.run.dir, setup_fn=setup_state, job_fn=work)


NEEDS_TOOLS = pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("ninja") and shutil.which("g++")),
                                 reason="needs cmake, ninja and g++")


@NEEDS_TOOLS
def test_end_to_end_fixture_engine(cluster, tmp_path, capsys):
    """The production path: `mkb eval`'s outline (kit.outline.evaluate.evaluate) with the default setup
    (kit.job.worker.setup_worker: pristine tree, workspace w<i>, native build) and kit.job.pipeline.run_job in two actors
    on the aarch64 node, on the fixture engine's samples; then the same samples through `mkb serve` on the cluster
    (:func:`_serve_gives_eval_statuses`, over the warm cache)."""
    from kit.outline.evaluate import evaluate

    cfg = _fixture_cfg(tmp_path, workers=2, timing_resource="aarch64")
    assert evaluate(cfg) == 0
    assert ray.is_initialized()  # an existing connection is left open
    rows = _records(cfg.run.dir)
    got = {r["sample_id"]: r["status"] for r in rows}
    why = {r["sample_id"]: r["error_message"][:2000] for r in rows}
    assert len(rows) == 4 and set(got) == {"correct", "compile_error", "wrong_result", "crash"}, why
    assert Status(got["correct"]) in CORRECT, why  # ok (or timing_failed: the fixture's timing is not ours)
    assert (got["compile_error"], got["wrong_result"], got["crash"]) == (
        "compile_error", "verify_mismatch", "runtime_crash"), why
    assert all(r["attempts"] == 1 for r in rows)
    assert {_node_of(r["worker"], cluster["arm_nodes"] | cluster["x86_nodes"]) for r in rows} <= cluster["arm_nodes"]
    assert "sample: CSR" in capsys.readouterr().out
    prov = json.loads((cfg.run.dir / "provenance.json").read_text())
    assert prov["engine"] == "fixture" and prov["dispatch"]["workers"] == 2
    _serve_gives_eval_statuses(cluster, cfg, got)


def _fixture_cfg(tmp_path: Path, **dispatch) -> EvalConfig:
    from conftest_fixture import copy_fixture_engine

    engine = copy_fixture_engine(tmp_path / "engine")
    return EvalConfig(
        run={"dir": tmp_path / "run"},
        tasks={"dir": FIXTURE_ROOT / "tasks", "split": "all", "ids": ["fx_argmax"]},
        candidates={"sources": [{"method": "sample", "path": FIXTURE_ROOT / "candidates" / "sample"}]},
        mnn={"cache_dir": tmp_path / "cache", "engine": "fixture", "source_dir": engine, "check_tree": False},
        build={"jobs": 1},
        verify={"trials": 2},
        timing={"warmup": 1, "iterations": 5, "rounds": 2},
        dispatch={"mode": "ray", **dispatch},
    )


@NEEDS_TOOLS
def test_split_build_and_timing_nodes_ship_artefacts(cluster, tmp_path):
    """dispatch.build_resource: two build workers on the x86 head build and verify; the one timing worker
    on the aarch64 node times what they ship through the object store, against the native baseline it was
    shipped at start (its own cache has no native build)."""
    from kit.outline.evaluate import evaluate

    cfg = _fixture_cfg(tmp_path, workers=2, build_resource="x86", timing_resource="aarch64")
    assert evaluate(cfg) == 0
    rows = _records(cfg.run.dir)
    by = {r["sample_id"]: r for r in rows}
    why = {s: r["error_message"][:2000] for s, r in by.items()}
    assert len(rows) == 4 and {s: r["status"] for s, r in by.items()} == {
        "correct": "ok", "compile_error": "compile_error", "wrong_result": "verify_mismatch",
        "crash": "runtime_crash"}, why
    nodes = cluster["arm_nodes"] | cluster["x86_nodes"]
    assert {_node_of(r["worker"], nodes) for r in rows} <= cluster["x86_nodes"]  # built and verified there
    ok = by["correct"]
    assert ok["timing_worker"].endswith(".t0") and _node_of(ok["timing_worker"], nodes) in cluster["arm_nodes"]
    assert ok["candidate_ms"] > 0 and ok["native_ms"] > 0 and len(ok["candidate_samples_ms"]) == 10
    assert ok["trials"] and ok["build_s"] > 0  # the build node's fields travel with the artefacts
    assert all(r["timing_worker"] == "" for s, r in by.items() if s != "correct")  # ended on the build node
    # both nodes share this machine's cache dir: the timer installed the shipped baseline, apart from native/
    shipped = list((cfg.mnn.cache_dir / "shipped").iterdir())
    assert len(shipped) == 1 and (shipped[0] / "bin" / "mkb_runner").is_file()
    assert not (shipped[0] / "bin" / "MNNConvert").exists()
    prov = json.loads((cfg.run.dir / "provenance.json").read_text())
    assert prov["dispatch"]["build_resource"] == "x86" and len(prov["dispatch"]["timing_workers"]) == 1


def die_once_then_time(job: Job, built, timer) -> Record:
    """Timing half that kills its own timing actor on a job's first timing (marker file), then times."""
    from kit.job.pipeline import time_job

    marker = timer.cfg.mnn.cache_dir / f"{job.job_id}.timed"
    if not marker.exists():
        marker.write_text(timer.name)
        os._exit(19)
    return time_job(job, built, timer)


@NEEDS_TOOLS
def test_split_timing_worker_death_rebuilds_and_retries(cluster, tmp_path):

    cfg = _fixture_cfg(tmp_path, workers=1, build_resource="x86", timing_resource="aarch64", max_retries=1)
    tasks = load_suite(cfg.tasks.dir, "all", ["fx_argmax"])
    jobs = [j for j in make_jobs(cfg, tasks, {t.id for t in tasks}, None)[0] if j.sample_id == "correct"]
    counts = run_distributed(cfg, jobs, cfg.run.dir, time_fn=die_once_then_time)
    assert counts.ran == 1
    (row,) = _records(cfg.run.dir)
    assert row["status"] == "ok" and row["attempts"] == 2, row["error_message"]
    assert (cfg.mnn.cache_dir / f"{row['job_id']}.timed").read_text().endswith(".t0")
    assert row["timing_worker"].endswith(".t0")


def test_missing_build_resource_is_a_clear_error(cluster, tmp_path):
    from kit.dispatch import DispatchError

    cfg = _cfg(tmp_path, build_resource="riscv64", timing_resource="aarch64")
    with pytest.raises(DispatchError, match="dispatch.build_resource.*riscv64"):
        run_distributed(cfg, _jobs(cfg, ["ok-1"]), cfg.run.dir, setup_fn=setup_state, job_fn=work)


def test_cli_reports_dispatch_errors_as_user_errors(cluster, tmp_path, capsys):
    """`mkb eval` with a resource no node carries: the message naming the field, exit code 2, no traceback."""
    from kit.cli import main

    cfg = tmp_path / "cfg.toml"
    cfg.write_text(fixture_config_text(tmp_path / "run", source_dir=FIXTURE_ROOT, cache_dir=tmp_path / "cache") + """
[dispatch]
mode = "ray"
""")
    assert main(["eval", "--config", str(cfg), "--dispatch.timing_resource", "riscv64"]) == 2
    err = capsys.readouterr().err
    assert "dispatch.timing_resource" in err and "riscv64" in err and "Traceback" not in err


def test_cli_reports_a_worker_setup_error_in_one_line_as_serial_mode_does(cluster, tmp_path, capsys, monkeypatch):
    """`mkb eval` whose workers cannot set up (no tree at mnn.source_dir): in Ray mode the same `mkb:` line as in
    serial mode (the setup error's own message), exit code 2, and no traceback — not Ray's ``ray::...ready()``
    header and the remote traceback."""
    from kit.cli import main

    cfg = tmp_path / "cfg.toml"
    cfg.write_text(fixture_config_text(tmp_path / "run", cache_dir=tmp_path / "cache") + """
[dispatch]
mode = "ray"
""")
    missing = tmp_path / "nonexistent"
    assert main(["eval", "--config", str(cfg), "--mnn.source_dir", str(missing), "--dispatch.mode", "serial"]) == 2
    serial = [line for line in capsys.readouterr().err.splitlines() if line.startswith("mkb:")]
    assert len(serial) == 1 and str(missing) in serial[0]

    assert main(["eval", "--config", str(cfg), "--mnn.source_dir", str(missing)]) == 2
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if line.startswith("mkb:")] == serial, err
    assert "Traceback" not in err and "ray::" not in err, err
    assert not [line for line in err.splitlines() if line.lstrip().startswith(('File "', "^^^"))], err


def test_losing_the_only_worker_node_is_a_clear_error_not_a_hang(cluster, tmp_path):
    """The one node carrying dispatch.timing_resource dies mid-run: its worker cannot be replaced anywhere,
    and the driver says so (naming the field) instead of waiting for a node forever; what finished is kept."""
    from kit.dispatch import DispatchError

    node = cluster["add_node"]('{"lone": 1}', "lone")
    cfg = _cfg(tmp_path, workers=1, timing_resource="lone", max_retries=5)
    jobs = _jobs(cfg, [f"ok-{i}" for i in range(40)])

    killer = _kill_node_after_first_record(node, cfg.run.dir)
    with pytest.raises(DispatchError, match="dispatch.timing_resource: no alive node .* 'lone' any more"):
        run_distributed(cfg, jobs, cfg.run.dir, setup_fn=setup_state, job_fn=work)
    killer.join()
    rows = _records(cfg.run.dir)
    assert 1 <= len(rows) < 40 and len({r["job_id"] for r in rows}) == len(rows)


def die_always_then_never_time(job: Job, built, timer) -> Record:
    """Timing half that kills its own timing actor every time."""
    os._exit(21)


@NEEDS_TOOLS
def test_split_timing_lost_on_every_try_keeps_the_build_outcome(cluster, tmp_path):
    """The timing worker dies on each try: the record says so (timing_failed / worker_lost), and keeps what
    the build node measured — it compiled and verified, so it counts for CSR and FCR, never as fast."""
    from kit.score import metrics

    cfg = _fixture_cfg(tmp_path, workers=1, build_resource="x86", timing_resource="aarch64", max_retries=1)
    tasks = load_suite(cfg.tasks.dir, "all", ["fx_argmax"])
    jobs = [j for j in make_jobs(cfg, tasks, {t.id for t in tasks}, None)[0] if j.sample_id == "correct"]
    assert run_distributed(cfg, jobs, cfg.run.dir, time_fn=die_always_then_never_time).ran == 1
    (row,) = _records(cfg.run.dir)
    assert (row["status"], row["error_kind"], row["attempts"]) == ("timing_failed", "worker_lost", 2), row
    assert "died on each of 2 tries" in row["error_message"] and row["timing_worker"].endswith(".t0")
    assert row["worker"].endswith(".w0") and row["build_s"] > 0 and row["trials"]  # the build node's fields
    assert row["candidate_ms"] is None and row["speedup"] is None
    s = metrics.summary(scan(cfg.run.dir).collect(), tasks)
    assert s.select("csr", "fcr", "fast_0").row(0) == (1.0, 1.0, 0.0)


@NEEDS_TOOLS
def test_split_with_timing_disabled_starts_no_timing_worker(cluster, tmp_path):
    """timing.enabled = false: build workers write the final records; no node needs the timing label."""

    cfg = _fixture_cfg(tmp_path, workers=1, build_resource="x86", timing_resource="riscv64")
    cfg = cfg.model_copy(update={"timing": cfg.timing.model_copy(update={"enabled": False})})
    tasks = load_suite(cfg.tasks.dir, "all", ["fx_argmax"])
    jobs = [j for j in make_jobs(cfg, tasks, {t.id for t in tasks}, None)[0] if j.sample_id in ("correct", "crash")]
    assert run_distributed(cfg, jobs, cfg.run.dir).ran == 2
    by = {r["sample_id"]: r for r in _records(cfg.run.dir)}
    assert (by["correct"]["status"], by["crash"]["status"]) == ("ok", "runtime_crash")
    assert by["correct"]["timing_worker"] == "" and by["correct"]["candidate_ms"] is None
    prov = json.loads((cfg.run.dir / "provenance.json").read_text())
    assert prov["dispatch"]["timing_workers"] == [] and "build_cpu_model" not in prov
    assert not (cfg.mnn.cache_dir / "shipped").exists()


def slow_time(job: Job, built, timer) -> Record:
    """Timing half that takes 2 s before timing for real (so the timing node can be killed mid-job)."""
    from kit.job.pipeline import time_job

    time.sleep(2)
    return time_job(job, built, timer)


@NEEDS_TOOLS
def test_losing_the_only_timing_node_is_a_clear_error_not_a_hang(cluster, tmp_path):
    """Build on the x86 head, time on a node of its own that dies mid-run: the timing slot cannot be placed
    again, and the driver says so (naming dispatch.timing_resource); what finished is kept, once each."""
    from kit.dispatch import DispatchError

    node = cluster["add_node"]('{"tlone": 1}', "tlone")
    cfg = _fixture_cfg(tmp_path, workers=1, build_resource="x86", timing_resource="tlone", max_retries=3)
    cfg = cfg.model_copy(update={"tasks": cfg.tasks.model_copy(update={"ids": []})})
    tasks = load_suite(cfg.tasks.dir, "all")
    jobs = [j for j in make_jobs(cfg, tasks, {t.id for t in tasks}, None)[0] if j.sample_id == "correct"]
    assert len(jobs) >= 3

    killer = _kill_node_after_first_record(node, cfg.run.dir)
    with pytest.raises(DispatchError, match="dispatch.timing_resource: no timing worker is left .*'tlone'"):
        run_distributed(cfg, jobs, cfg.run.dir, time_fn=slow_time)
    killer.join()
    rows = _records(cfg.run.dir)
    assert 1 <= len(rows) < len(jobs) and len({r["job_id"] for r in rows}) == len(rows)
    assert all(r["status"] == "ok" and r["timing_worker"].endswith(".t0") for r in rows)


def test_an_address_where_nothing_answers_is_a_clear_error_at_once():
    """`ray.init` would retry for minutes; the kit tries one TCP connection and names dispatch.address."""
    from kit.dispatch import DispatchError
    from kit.dispatch.cluster import _check_reachable

    with socket.socket() as s:  # a port that was just free and has no listener
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(DispatchError, match=f"dispatch.address: nothing answers at 127.0.0.1:{port}"):
        _check_reachable(f"127.0.0.1:{port}")
    with socket.socket() as srv:  # a listener: reachable, no error
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        _check_reachable(f"127.0.0.1:{srv.getsockname()[1]}")
    _check_reachable("auto")  # left to Ray
    # a Ray Client address too, naming the port Ray Client's server listens on
    with pytest.raises(DispatchError, match=f"nothing answers at ray://127.0.0.1:{port}.*--ray-client-server-port {port}"):
        _check_reachable(f"ray://127.0.0.1:{port}")


def test_a_ray_client_address_without_ray_client_says_what_to_install(monkeypatch):
    """`ray://` joins through Ray Client, which plain `ray` lacks: connect() says to install the kit's `client`
    extra instead of passing Ray's advice (`pip install ray[client]`, any version) along."""
    from kit.dispatch import cluster as dispatch

    def no_init(*args, **kwargs):
        raise AssertionError("ray.init must not be called")

    cfg = EvalConfig(dispatch={"mode": "ray", "address": "ray://127.0.0.1:10001"})
    monkeypatch.setattr(dispatch.ray, "is_initialized", lambda: False)
    monkeypatch.setattr(dispatch.ray, "init", no_init)
    monkeypatch.setattr(dispatch, "_ray_client_missing", lambda: True)
    with pytest.raises(dispatch.DispatchError, match=r"dispatch.address: 'ray://127.0.0.1:10001' .*Ray Client.*"
                                                     r"pip install -e '\.\[client\]'.*ray\[client\]==" + ray.__version__):
        dispatch.connect(cfg)
    monkeypatch.setattr(dispatch, "_ray_client_missing", lambda: False)  # installed: on to the reachability check
    monkeypatch.setattr(dispatch, "CONNECT_CHECK_S", 2.0)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = EvalConfig(dispatch={"mode": "ray", "address": f"ray://127.0.0.1:{port}"})
    with pytest.raises(dispatch.DispatchError, match="nothing answers"):
        dispatch.connect(cfg)



def _serve_gives_eval_statuses(cluster: dict, cfg: EvalConfig, evaluated: dict[str, str]) -> None:
    """`mkb serve` with ``cfg`` naming the Ray cluster (dispatch.address), over the cache an evaluation of the
    same samples warmed: its checks run on two build actors on the aarch64 node (records in their shards, the
    dispatch in provenance.json), a correctness-only check too, an identical submission comes from the cache;
    every verdict is the evaluation's status (``evaluated``); a service started again keeps the verdicts."""
    from serving import TOKEN, Running, files_of

    from kit.serve.server import service

    cfg = cfg.model_copy(update={"run": cfg.run.model_copy(update={"dir": cfg.run.dir.with_name("served")}),
                                 "dispatch": cfg.dispatch.model_copy(update={"address": cluster["address"]})})
    root = FIXTURE_ROOT / "candidates" / "sample" / "fx_argmax"
    running = Running(service(cfg, TOKEN, port=0, queue_limit=8))
    try:
        with running.client() as c:
            ids = {d.name: c.post("/v1/checks", json={"task_id": "fx_argmax", "files": files_of(d), "method": "sample",
                                                      "sample_id": d.name}).json()["id"] for d in root.iterdir()}
            quick = c.post("/v1/checks", json={"task_id": "fx_argmax", "files": files_of(root / "correct"),
                                               "options": {"timing": False}}).json()["id"]
            views = {s: c.get(f"/v1/checks/{i}", params={"wait": 300}).json() for s, i in ids.items()}
            quick_view = c.get(f"/v1/checks/{quick}", params={"wait": 300}).json()
            again = c.post("/v1/checks", json={"task_id": "fx_argmax", "files": files_of(root / "correct"),
                                               "method": "other"}).json()
            workers = c.get("/v1/stats").json()["workers"]
    finally:
        running.stop()
    assert {s: v["status"] for s, v in views.items()} == evaluated
    assert workers == 2 and again["cached"] and again["id"] == ids["correct"]
    assert quick_view["timing"] is False and quick_view["ended_in"] == "verify", quick_view
    rows = _records(cfg.run.dir)
    assert sorted(r["sample_id"] for r in rows) == sorted(ids) and all(r["attempts"] == 1 for r in rows)
    nodes = cluster["arm_nodes"] | cluster["x86_nodes"]
    assert {_node_of(r["worker"], nodes) for r in rows} <= cluster["arm_nodes"]
    assert json.loads((cfg.run.dir / "provenance.json").read_text())["dispatch"]["workers"] == 2
    restarted = Running(service(cfg, TOKEN, port=0, workers=0, queue_limit=8))  # no worker: only what is kept
    try:
        with restarted.client() as c:
            assert {s: c.get(f"/v1/checks/{i}").json()["status"] for s, i in ids.items()} == evaluated
    finally:
        restarted.stop()


def test_serve_ray_worker_retries_a_dead_actor_then_records_worker_lost(cluster, tmp_path):
    """`mkb serve`'s Ray worker (kit.dispatch.serving.RayPlace) as the driver: an actor that dies during a check is
    replaced and the check tried again (attempts 2), one that dies on every try is `worker_lost`, a job function
    that raises is a `harness_error`; the place goes on with a new actor after each."""
    from kit.dispatch.serving import RayPlaces

    cfg = _cfg(tmp_path, workers=1, timing_resource="aarch64", max_retries=1, address=cluster["address"])
    pool = RayPlaces(cfg, setup_fn=setup_state, job_fn=work)
    (place,) = pool.open()
    try:
        got = {j.sample_id: place.run(j) for j in _jobs(cfg, ["die1-a", "dieall-b", "raise-c", "ok-1"])}
    finally:
        pool.close()
    assert {s: (r.status, r.attempts) for s, r in got.items()} == {
        "die1-a": (Status.OK, 2), "dieall-b": (Status.WORKER_LOST, 2), "raise-c": (Status.HARNESS_ERROR, 1),
        "ok-1": (Status.OK, 1)}
    assert "job function bug in raise-c" in got["raise-c"].error_message
    assert _node_of(got["ok-1"].worker, cluster["arm_nodes"] | cluster["x86_nodes"]) in cluster["arm_nodes"]
