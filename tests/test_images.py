"""The pinned Docker images: lock file, and (with a daemon) real builds and runs.

Docker tests need a daemon at DOCKER_HOST (or the default socket) and skip otherwise.  They never use the
network: the tiny image is built from the local base image (images/make-base.sh) with network none, and the
kit image must have been built before (``nox -s images``); each skips when its image is absent.
"""

from __future__ import annotations

import platform
import tomllib
from pathlib import Path

import pytest

from kit import images
from kit.host.machine import normalize_arch


def test_repo_lock_parses_and_matches_requirements() -> None:
    lock = images.load_lock()
    pins = images.read_requirements(images.IMAGES_DIR / lock.python.requirements)
    from kit.settings.config import MNN_TREE_SHA256, MNN_VERSION

    assert lock.mnn.version == MNN_VERSION and lock.mnn.tree_sha256 == MNN_TREE_SHA256
    # the kit's direct runtime dependencies are all pinned, torch is not
    for dep in ("numpy", "onnxruntime", "pydantic", "polars", "ray", "docker", "mnn", "pytest"):
        assert dep in pins, dep
    assert "torch" not in pins
    for arch, versions in lock.apt.items():
        assert set(versions) == set(images.APT_PACKAGES), arch


def test_lock_roundtrip_and_errors(tmp_path: Path) -> None:
    lock = images.load_lock()
    (tmp_path / lock.python.requirements).write_bytes(
        (images.IMAGES_DIR / lock.python.requirements).read_bytes()
    )
    out = tmp_path / "lock.toml"
    images.write_lock(lock, out)
    assert images.load_lock(out) == lock
    assert tomllib.loads(out.read_text())["schema"] == 1

    text = out.read_text()
    out.write_text(text.replace('suite = "bookworm"', 'suite = "bookworm"\nsuit = "x"'))
    with pytest.raises(images.ImageError, match=r"base\.suit"):
        images.load_lock(out)
    out.write_text(text + '\n[apt.riscv64]\npython3 = "1"\n')
    with pytest.raises(images.ImageError, match="riscv64"):
        images.load_lock(out)
    out.write_text(text)
    (tmp_path / lock.python.requirements).write_text("numpy==1.0\n")
    with pytest.raises(images.ImageError, match="requirements_sha256"):
        images.load_lock(out)


def test_read_requirements_rejects_unpinned(tmp_path: Path) -> None:
    req = tmp_path / "r.lock"
    req.write_text("# c\nNumPy==2.4.6\npydantic_core==2.50.5\n")
    assert images.read_requirements(req) == {"numpy": "2.4.6", "pydantic-core": "2.50.5"}
    req.write_text("numpy>=2\n")
    with pytest.raises(images.ImageError, match=r"r\.lock:1"):
        images.read_requirements(req)


def test_buildargs_pin_apt_and_need_a_base() -> None:
    lock = images.load_lock()
    bare = lock.model_copy(update={"base": images.BaseSection(), "apt": {}})
    with pytest.raises(images.ImageError, match="no base image for arm64"):
        images.kit_buildargs(bare, "arm64", None, True, "context", 2)
    pinned = bare.model_copy(update={"apt": {"amd64": {"cmake": "3.25.1-1"}}})
    args = images.kit_buildargs(pinned, "amd64", "some/base:1", True, "context", 2)
    assert args["BASE_IMAGE"] == "some/base:1" and args["TARGETARCH"] == "amd64"
    assert "cmake=3.25.1-1" in args["APT_PACKAGES"].split() and "python3" in args["APT_PACKAGES"].split()
    assert args["SKIP_MNN_BUILD"] == "1"


# ------------------------------------------------------------------------------------------ with a daemon


@pytest.fixture(scope="module")
def daemon() -> None:
    if not images.daemon_available():
        pytest.skip("no Docker daemon reachable (DOCKER_HOST or the default socket)")


def _local_image(name: str) -> str:
    try:
        return images.image_info(name)["id"]
    except images.ImageError:
        pytest.skip(f"image {name} is not in the daemon (build it first; see images/README.md)")


@pytest.mark.docker
def test_tiny_image_from_local_base(daemon: None, tmp_path: Path) -> None:
    lock = images.load_lock()
    arch = normalize_arch(platform.machine())
    if arch not in lock.base.local:
        pytest.skip(f"no local base image recorded for {arch} in images/lock.toml")
    base = _local_image(lock.base.local[arch].id)
    dockerfile = (
        f"FROM {base}\nRUN echo built-offline > /mkb-probe && dpkg --print-architecture >> /mkb-probe\n"
    )
    ctx = images.build_context(tmp_path / "ctx.tar", extra={"tiny.Dockerfile": dockerfile.encode()})
    res = images.build_image(ctx, "mkb-test-tiny:latest", dockerfile="tiny.Dockerfile", network_mode="none")
    try:
        assert res.image_id.startswith("sha256:")
        assert images.image_info(res.tag)["id"] == res.image_id
        # one container (each start copies the image with the vfs driver): output and exit code
        out = images.run(
            res.tag, ["-c", "cat /mkb-probe; exit 7"], entrypoint=["sh"], network="none", timeout_s=300
        )
        assert out.exit_code == 7
        assert out.output.split() == ["built-offline", arch]
        assert images.image_emulated(res.tag) is False
    finally:
        import docker

        docker.from_env().images.remove(res.tag, force=True)


@pytest.mark.docker
def test_kit_image_runs_offline_with_every_pin(daemon: None) -> None:
    lock = images.load_lock()
    arch = normalize_arch(platform.machine())
    pin = lock.image.get(arch)
    if pin is None:
        pytest.skip(f"no kit image recorded for {arch} in images/lock.toml (nox -s images)")
    _local_image(pin.tag)
    probe = images.probe_image(pin.tag)  # one run with network none
    assert probe.help_exit == 0, probe.help_output
    assert "usage: mkb" in probe.help_output
    pins = images.read_requirements(images.IMAGES_DIR / lock.python.requirements)
    assert images.check_probe(probe, pins, lock.apt.get(arch)) == []
    assert probe.packages.get("mobilekernelbench-kit") == "0.1.0"
    assert set(probe.apt) == set(images.APT_PACKAGES)
    assert probe.env["MKB_MNN__SOURCE_DIR"] == f"/opt/mnn-{lock.mnn.version}"
    assert probe.emulated is images.image_emulated(pin.tag)
    # check_probe is not vacuous: a wrong pin is reported
    wrong = dict(pins, numpy="0.0.1")
    assert images.check_probe(probe, wrong) == ["python numpy: pinned 0.0.1, installed " + pins["numpy"]]


def test_seeding_a_cache_whose_parent_does_not_exist_yet(tmp_path):
    """A fresh HOME: ``~/.cache`` is missing, and the seed lock lies beside the cache, in it."""
    from types import SimpleNamespace

    from kit.images.seed import CACHE_ENV, seed_cache

    cache = tmp_path / "home" / ".cache" / "mkb"

    def no_cache(*_a):
        raise RuntimeError("Could not find the file /opt/mkb-cache in container")

    api = SimpleNamespace(create_container=lambda *a, **k: {"Id": "c1"}, get_archive=no_cache,
                          remove_container=lambda *a, **k: None)
    image = SimpleNamespace(attrs={"Config": {"Env": [f"{CACHE_ENV}={cache}"]}})
    client = SimpleNamespace(images=SimpleNamespace(get=lambda _id: image), api=api)
    assert seed_cache(client, "sha256:abc", cache) is None  # the image has no cache: nothing copied
    assert (cache.parent / "mkb.seed.lock").is_file()
