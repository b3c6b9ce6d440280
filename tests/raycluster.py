"""A real multi-node Ray cluster on loopback for the dispatch tests (``tests/test_dispatch*.py``): a head with
2 CPUs and resource ``x86`` and a second node with 2 CPUs and resource ``aarch64``, both raylets on 127.0.0.1,
started once per test module that uses the :func:`cluster` fixture (import it there).  Run such tests inside a
private network namespace::

    unshare -n sh -c 'ip link set lo up; .venv/bin/pytest tests/test_dispatch.py -q'
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import ray

RAY_BIN = Path(sys.executable).with_name("ray")
#: generous: Ray start is slow on a loaded 2-core machine
STARTUP_S = 180


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_log(log: Path, text: str, p: subprocess.Popen, timeout_s: float) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if log.is_file() and text in log.read_text(errors="replace"):
            return
        if p.poll() is not None:
            raise RuntimeError(f"ray start exited with {p.returncode}; see {log}")
        time.sleep(0.3)
    raise TimeoutError(f"no {text!r} in {log} within {timeout_s} s")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest):
    """Head (2 CPUs, ``x86``) + one node (2 CPUs, ``aarch64``) on loopback; the driver connected to it.

    ``ray start --block`` keeps each raylet's processes under one process group we own; teardown ends
    those groups by id with SIGKILL (fast; never ``ray stop``, which would stop every Ray instance on the machine).
    Background processes cannot go through kit.host.proc.run (it waits), hence subprocess.Popen here.
    """
    home = tmp_path_factory.mktemp("home")
    temp_dir = Path(tempfile.mkdtemp(prefix="mkbr", dir="/tmp"))  # short: Ray's unix socket paths
    extra = {"HOME": str(home), "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    saved = {k: os.environ.get(k) for k in extra}
    os.environ.update(extra)
    env = dict(os.environ)
    port = _free_port()
    common = ["--block", "--node-ip-address=127.0.0.1", f"--temp-dir={temp_dir}", "--disable-usage-stats"]
    procs: list[subprocess.Popen] = []
    logs = tmp_path_factory.mktemp("raylogs")

    def start(args: list[str], tag: str) -> None:
        with open(logs / f"{tag}.log", "wb") as out:  # the child keeps its own descriptor
            procs.append(subprocess.Popen([str(RAY_BIN), "start", *args, *common], env=env, stdout=out,
                                          stderr=subprocess.STDOUT, start_new_session=True))

    try:
        start(["--head", f"--port={port}", "--num-cpus=2", '--resources={"x86": 1}', "--include-dashboard=false"], "head")
        _wait_log(logs / "head.log", "Ray runtime started", procs[-1], STARTUP_S)
        address = f"127.0.0.1:{port}"
        start([f"--address={address}", "--num-cpus=2", '--resources={"aarch64": 1}'], "arm")
        _wait_log(logs / "arm.log", "Ray runtime started", procs[-1], STARTUP_S)
        ray.init(address=address, log_to_driver=False)
        ray.cloudpickle.register_pickle_by_value(request.module)  # its injected job functions
        end = time.monotonic() + STARTUP_S
        while sum(1 for n in ray.nodes() if n["Alive"]) < 2:
            if time.monotonic() > end:
                raise TimeoutError(f"cluster nodes did not join; logs in {logs}")
            time.sleep(0.5)
        nodes = [n for n in ray.nodes() if n["Alive"]]

        def add_node(resources: str, tag: str) -> subprocess.Popen:
            """One more raylet (1 CPU) with these custom resources; the test kills it (teardown too)."""
            start([f"--address={address}", "--num-cpus=1", f"--resources={resources}"], tag)
            _wait_log(logs / f"{tag}.log", "Ray runtime started", procs[-1], STARTUP_S)
            return procs[-1]

        yield {
            "add_node": add_node,
            "address": address,
            "arm_nodes": {n["NodeID"] for n in nodes if n["Resources"].get("aarch64")},
            "x86_nodes": {n["NodeID"] for n in nodes if n["Resources"].get("x86")},
        }
    finally:
        if ray.is_initialized():
            ray.shutdown()
        for p in procs:  # each group: `ray start --block` and every daemon and worker it started
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
        shutil.rmtree(temp_dir, ignore_errors=True)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
