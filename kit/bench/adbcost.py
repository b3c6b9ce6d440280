"""Benchmark 6 (``--adb-cost``): the kit's adb executor's per-candidate overhead over its raw steps, on the fake
device of the tests (``tests/fake_adb``: adb's command-line contract over a local folder, the aarch64 runners
under qemu), side by side in one run.

The fixture engine (or the real tree, ``MKB_MNN__SOURCE_DIR``) is cross-built for aarch64 and a worker opens its
device session.  One candidate's timing (the task's native model on both sides, the candidate's runner and model
copies outside the native baseline so that they are pushed per job as a candidate's are; ``timing.rounds``
rounds) is
first run once through the kit with every adb command recorded (a logging ``adb`` in front of the fake one), in
the session's steady state (a second candidate: the native baseline is already on the device).  Then, in
interleaved repeats A B A B:

* **kit**: the same timing through the kit's executor (:class:`kit.devices.session.DeviceSession`: the job's
  folder made and emptied, files pushed content-addressed, the runners started up to their rendezvous and
  released, outputs pulled, the device's state and load read, the baseline's sha256 checked before and after);
* **raw**: the recorded commands that do the work, run directly one after the other with ``subprocess``: each
  ``adb push``, each runner's ``adb shell`` (its "go" given at once) and ``adb pull``, and one ``rm -rf`` of the
  folder; none of the kit's bookkeeping.

Prints the median seconds of each, their ratio and difference per candidate, and the kit's configured waits
(``device.load_sample_s``, part of the kit's figure and of no raw step).  The fake device's runs are emulated:
the plumbing is what this measures, not a phone's speed.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from kit.bench.common import ROOT, real_engine, write_config
from kit.devices.adb import Adb
from kit.settings.config import load_config
from kit.stages import timing as stiming
from kit.stages.verify import SideModel
from kit.suite.tasks import load_suite

SERIAL = "BENCH0001"
#: seconds between the kit's two /proc/stat reads of the device's load (device.load_sample_s)
LOAD_SAMPLE_S = 0.1

_LOGGER = """#!{python}
import json, os, sys
with open({log!r}, "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
os.execv({adb!r}, [{adb!r}, *sys.argv[1:]])
"""


def _fake_device(tmp: Path):
    """The fake adb installed under ``tmp`` and one fake phone (``tests/fake_adb/fakedev.py``)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from fake_adb.fakedev import install, make_device

    adb = install(tmp / "bin")
    make_device(tmp / "phones", SERIAL)
    return adb


def _raw_steps(log: Path, tmp: Path) -> list[tuple[list[str], bytes]]:
    """The recorded commands that do the work (module docstring), each with its stdin; pulls into fresh
    folders under ``tmp``; one ``rm -rf`` of the session's folder at the end."""
    steps, root = [], None
    for n, line in enumerate(log.read_text().splitlines()):
        argv = json.loads(line)
        if argv[:2] != ["-s", SERIAL] or len(argv) < 3:
            continue
        cmd = argv[2]
        if cmd == "push":
            steps.append((argv, b""))
            root = root or argv[-1].split("/j/")[0].split("/b/")[0]
        elif cmd == "pull":
            steps.append(([*argv[:-1], str(tmp / f"pull{n}")], b""))
        elif cmd == "shell" and "taskset" in argv[-1]:
            steps.append((argv, b"go\n"))
    if root is None:
        raise SystemExit("the recorded timing pushed nothing: no raw steps to replay")
    steps.append((["-s", SERIAL, "shell", f"rm -rf {root}/j"], b""))
    return steps


def _replay(adb: Path, steps: list[tuple[list[str], bytes]], tmp: Path) -> float:
    for argv, _ in steps:
        if argv[2] == "pull":
            shutil.rmtree(argv[-1], ignore_errors=True)
    t0 = time.monotonic()
    for argv, stdin in steps:
        # the floor the kit is compared with: the same adb calls without the kit's runner (its sessions, limits)
        res = subprocess.run([str(adb), *argv], input=stdin, capture_output=True, timeout=600)
        if res.returncode != 0:
            raise SystemExit(f"raw step {argv[2:4]} failed: {res.stderr.decode(errors='replace')[-300:]}")
    return time.monotonic() - t0


def adb_cost(task_id: str | None, repeats: int) -> int:
    """Benchmark 6 (see the module docstring)."""
    real = real_engine()
    task_id = task_id or ("hard_sigmoid_4d" if real else "fx_argmax")
    with tempfile.TemporaryDirectory(prefix="mkb-adbcost-") as tmp_s:
        tmp = Path(tmp_s)
        adb = _fake_device(tmp)
        before = os.environ.get("ADB_FAKE_HOME")
        os.environ["ADB_FAKE_HOME"] = str(tmp / "phones")  # where the fake adb finds its phone (adb's env keeps ADB_*)
        try:
            cost, steps, cfg, rounds = _measure(tmp, adb, real, task_id, repeats)
        finally:
            if before is None:
                os.environ.pop("ADB_FAKE_HOME", None)
            else:
                os.environ["ADB_FAKE_HOME"] = before
    _print(cfg, task_id, repeats, cost, steps, rounds)
    return 0


#: the timing rounds of every pass (the fixed protocol the default config had before adaptive rounds)
ROUNDS = 10


def _config(tmp: Path, adb: Path, real: bool, task_id: str):
    """The benchmark's config: the engine cross-built for aarch64, timed on the fake phone, at the fixed protocol
    of :data:`ROUNDS` rounds (an adaptive timing could stop at another look in the recorded pass than in the
    timings it is compared with)."""
    path = write_config(tmp, real, task_id, tmp / "none")
    path.write_text(path.read_text() + f'[target]\narch = "aarch64"\n[device]\nkind = "adb"\nserial = "{SERIAL}"\n'
                    f'adb = "{adb}"\nload_sample_s = {LOAD_SAMPLE_S}\npoll_s = 0.1\n[timing]\nrounds = {ROUNDS}\n')
    return load_config(path)


def _sides(worker, task, tmp: Path):
    """(candidate, native) sides: the native model and runner, and copies of them outside the native baseline
    as the candidate's (pushed for every job, as a candidate's own files are)."""
    model = worker.native_models.model(task)
    if worker.device is None or model is None:
        raise SystemExit(f"no device session, or native MNN cannot convert {task.id}")
    (tmp / "cand").mkdir()
    runner = Path(shutil.copy2(worker.native_side.runner or worker.native.runner, tmp / "cand" / "mkb_runner"))
    cand = SideModel(Path(shutil.copy2(model, tmp / "cand" / model.name)), replace(worker.native_side, runner=runner))
    return cand, SideModel(model, worker.native_side)


def _measure(tmp: Path, adb: Path, real: bool, task_id: str, repeats: int):
    """The recorded pass, then ``repeats`` interleaved kit / raw timings: (cost, raw steps, config, rounds)."""
    from kit.job.worker import setup_worker

    cfg = _config(tmp, adb, real, task_id)
    task = next(t for t in load_suite(cfg.tasks.dir) if t.id == task_id)
    worker = setup_worker(cfg)
    try:
        session = worker.device
        cand, native = _sides(worker, task, tmp)

        def kit_once(d: Path) -> float:
            t0 = time.monotonic()
            stiming.time_candidate(task, cand, native, worker.timing,
                                   stiming.TimingSetup(worker.native.runner, d, session.hold, session.prepare))
            return time.monotonic() - t0

        kit_once(tmp / "warm")  # the native baseline goes onto the device once per session
        log, logger = tmp / "adb.log", tmp / "bin" / "adb-log"
        logger.write_text(_LOGGER.format(python=sys.executable, log=str(log), adb=str(adb)))
        logger.chmod(0o755)
        plain, session.adb = session.adb, Adb(logger, SERIAL, session.adb.timeout_s)
        kit_once(tmp / "recorded")
        session.adb = plain
        steps = _raw_steps(log, tmp)
        cost: dict[str, list[float]] = {"kit": [], "raw": []}
        for i in range(repeats):
            cost["kit"].append(kit_once(tmp / f"kit{i}"))
            cost["raw"].append(_replay(adb, steps, tmp))
        return cost, steps, cfg, worker.timing.rounds
    finally:
        worker.release()


def _print(cfg, task_id: str, repeats: int, cost: dict[str, list[float]], steps, rounds: int) -> None:
    med = {k: statistics.median(v) for k, v in cost.items()}
    kinds = [a[2] for a, _ in steps]
    runs = sum(1 for a, _ in steps if a[2] == "shell" and "taskset" in a[-1])
    print(f"engine: {'MNN ' + cfg.mnn.version if real_engine() else 'fixture'} cross-built for aarch64; task "
          f"{task_id}; fake adb device (runs under qemu: emulated); {repeats} interleaved repeats")
    print(f"raw steps per candidate: {kinds.count('push')} push, {runs} runs ({rounds} rounds x 2 sides), "
          f"{kinds.count('pull')} pull, 1 rm")
    print(f"raw steps, direct:           {med['raw']:.3f} s (range {min(cost['raw']):.3f}-{max(cost['raw']):.3f})")
    print(f"through the kit's executor:  {med['kit']:.3f} s (range {min(cost['kit']):.3f}-{max(cost['kit']):.3f})")
    pairs = [k / r for k, r in zip(cost["kit"], cost["raw"])]  # each kit run beside the raw run after it
    print(f"ratio of medians kit / raw {med['kit'] / med['raw']:.2f}; per adjacent pair median "
          f"{statistics.median(pairs):.2f} (range {min(pairs):.2f}-{max(pairs):.2f}); host load "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"overhead {med['kit'] - med['raw']:+.3f} s per candidate, "
          f"of which {LOAD_SAMPLE_S:g} s is the configured load sample (device.load_sample_s; default 1 s)")
