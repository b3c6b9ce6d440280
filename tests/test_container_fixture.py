"""``container.mode = "docker"``: commands exec'd in a worker's container keep kit.host.proc's semantics, the image is
checked against the lock, and the fixture sample set gives the same statuses in the container as on the host.

Needs a Docker daemon (``DOCKER_HOST``) and a kit image with the toolchain: ``MKB_TEST_IMAGE`` (CI builds one
with ``SKIP_MNN_BUILD=1``), else the lock's ``image.<arch>.tag``; skipped cleanly without either.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import polars as pl
import pytest
from evalcfg import write_config

from kit.host import proc
from kit.images import container as icontainer
from kit.images import daemon_available, image_info, load_lock
from kit.images.common import ImageError
from kit.outline.evaluate import evaluate
from kit.results.shards import scan
from kit.settings.config import load_config

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _arch() -> str:
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine, os.uname().machine)


@pytest.fixture(scope="module")
def kit_image() -> str:
    if not daemon_available():
        pytest.skip("no Docker daemon (DOCKER_HOST)")
    name = os.environ.get("MKB_TEST_IMAGE") or load_lock().image.get(_arch()).tag
    try:
        return image_info(name)["id"]
    except ImageError:
        pytest.skip(f"image {name} is not in the daemon (MKB_TEST_IMAGE, or nox -s images)")


@pytest.fixture(scope="module")
def lock_of(tmp_path_factory, kit_image):
    """A lock file pinning ``kit_image`` (the repository's lock may pin another build)."""
    text = (Path(icontainer.LOCK_PATH)).read_text()
    lock = load_lock(check_requirements=False)
    old = lock.image[_arch()].id
    path = tmp_path_factory.mktemp("lock") / "lock.toml"
    path.write_text(text.replace(old, kit_image) if old else text)
    return path


@pytest.fixture
def box(tmp_path, kit_image, lock_of):
    check = icontainer.check_image(kit_image, lock_file=lock_of)
    wc = icontainer.start_worker_container(image=check, cache_dir=tmp_path / "cache", ro_paths=[],
                                           run="proc-test", worker="w0",
                                           limits=icontainer.ContainerLimits(cpus=1, memory_mb=512, pids=256))
    wc.activate()
    yield wc
    wc.remove()


def test_commands_in_the_container_keep_proc_semantics(box, tmp_path):
    inside = proc.run(["sh", "-c", "cat /etc/hostname; ls /sys/class/net; echo e >&2; cat; exit 4"],
                      stdin_bytes=b"in\n", timeout_s=60)
    assert inside.returncode == 4 and inside.stderr == "e\n"
    assert inside.stdout.split()[1:] == ["lo", "in"]  # network none: loopback only
    assert inside.stdout.split()[0] == box.id[:12]  # it ran in the container, not here
    crashed = proc.run(["sh", "-c", "kill -SEGV $$"], timeout_s=60)
    assert (crashed.returncode, crashed.signal) == (-11, 11)
    hung = proc.run(["sh", "-c", "sleep 300 & sleep 300"], timeout_s=2)
    assert hung.timed_out
    left = proc.run(["sh", "-c", "for p in /proc/[0-9]*; do cat $p/cmdline | tr '\\0' ' '; echo; done"],
                    timeout_s=60)
    assert "sleep 300" not in left.stdout  # the timeout killed the session inside the container too
    waiting = proc.start(["sh", "-c", "echo READY; read x; echo got $x"], ready_line="READY", timeout_s=60)
    assert isinstance(waiting, proc.Waiting)
    assert waiting.go(30).stdout == "got go\n"
    written = proc.run(["sh", "-c", f"echo x > {tmp_path}/cache/f; touch /usr/x"], timeout_s=60)
    assert (tmp_path / "cache" / "f").read_text() == "x\n"  # the cache volume is writable, the image is not
    assert written.returncode != 0 and "Read-only file system" in written.stderr
    bomb = proc.run(["sh", "-c", "head -c 700000000 /dev/zero | tail -c 1 >/dev/null; x=$(head -c 600m "
                     "/dev/zero | tr '\\0' a); echo survived"], timeout_s=120)
    assert "survived" not in bomb.stdout  # 512 MiB: the container's memory limit


def test_an_image_the_lock_does_not_pin_is_refused(kit_image, tmp_path):
    lock = tmp_path / "lock.toml"
    lock.write_text(Path(icontainer.LOCK_PATH).read_text().replace(
        load_lock(check_requirements=False).image[_arch()].id, "sha256:" + "0" * 64))
    with pytest.raises(icontainer.ImageMismatch, match="refusing to evaluate"):
        icontainer.check_image(kit_image, lock_file=lock)
    allowed = icontainer.check_image(kit_image, lock_file=lock, allow_mismatch=True)
    assert allowed.id == kit_image and not allowed.matches_lock


def _records(run_dir: Path) -> pl.DataFrame:
    df = scan(run_dir)
    return df.collect() if isinstance(df, pl.LazyFrame) else df


def _statuses(run_dir: Path) -> dict[str, str]:
    # keyed by task and sample: the job ids differ (container.mode is in the config digest they cover)
    df = _records(run_dir)
    keys = [f"{t}/{s}" for t, s in zip(df["task_id"].to_list(), df["sample_id"].to_list(), strict=True)]
    return dict(zip(keys, df["status"].to_list(), strict=True))


def test_fixture_samples_give_the_host_statuses_in_the_container(tmp_path, kit_image, lock_of,
                                                                fixture_engine_pristine, fixture_tasks_dir,
                                                                fixture_candidates_dir):
    ids = ["fx_argmax", "fx_exp", "fx_sub", "fx_transpose"]
    common = dict(tasks_dir=fixture_tasks_dir, ids=ids, method="sample",
                  candidates=fixture_candidates_dir / "sample",
                  verify={"trials": 2}, timing={"warmup": 1, "iterations": 5, "rounds": 2}, build={"jobs": 2})
    runs = {}
    for mode in ("host", "docker"):
        extra = {"container": {"mode": "docker", "image": kit_image, "lock_file": str(lock_of), "cpus": 2,
                               "memory_mb": 4096}} if mode == "docker" else {}
        cfg = write_config(tmp_path / f"{mode}.toml", run_dir=tmp_path / mode,
                           mnn={"engine": "fixture", "source_dir": fixture_engine_pristine,
                                "cache_dir": tmp_path / f"cache-{mode}"}, **common, **extra)
        assert evaluate(load_config(cfg)) == 0
        runs[mode] = tmp_path / mode
    host, docker = _statuses(runs["host"]), _statuses(runs["docker"])
    assert len(host) == 16 and docker == host
    assert {"ok", "compile_error", "verify_mismatch", "runtime_crash"} <= set(host.values())
    images = _records(runs["docker"])["image_id"].unique().to_list()
    assert images == [kit_image]
    assert _records(runs["host"])["image_id"].unique().to_list() == [""]
    prov = json.loads((runs["docker"] / "provenance.json").read_text())
    session = prov["sessions"][-1] if "sessions" in prov else prov
    assert session["container"]["image_id"] == kit_image and session["container"]["matches_lock"]
    assert icontainer.leftovers("docker") == ([], [])  # container and volume removed with the worker


def test_a_killed_worker_leaves_no_container(tmp_path, kit_image, lock_of):
    script = (f"import sys, time; sys.path.insert(0, {str(Path.cwd())!r}); from kit.images import container as c; "
              f"ch = c.check_image({kit_image!r}, lock_file={str(lock_of)!r}); "
              f"c.start_worker_container(image=ch, cache_dir={str(tmp_path / 'cache')!r}, ro_paths=[], "
              "run='killed-test', worker='w0'); print('up', flush=True); time.sleep(600)")
    child = proc.start([sys.executable, "-c", script], ready_line="up", timeout_s=300,
                        env=proc.base_env({"DOCKER_HOST": os.environ.get("DOCKER_HOST", "")}))
    assert isinstance(child, proc.Waiting)
    assert icontainer.leftovers("killed-test")[0]  # running
    child.cancel()  # SIGKILL: the worker cannot clean up; its reaper does
    for _ in range(60):
        if icontainer.leftovers("killed-test") == ([], []):
            break
        import time

        time.sleep(0.5)
    assert icontainer.leftovers("killed-test") == ([], [])
    shutil.rmtree(tmp_path / "cache", ignore_errors=True)
