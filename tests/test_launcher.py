"""The Ray cluster launcher config for ARM cloud nodes (cluster/aws-graviton.yaml) and its checks.

Ray's own ``prepare_config`` + ``validate_config`` (ray/autoscaler/ray-schema.json) run offline; the YAML is then
held against what a kit config's workers ask Ray for (:func:`kit.dispatch.cluster.actor_requests`, the very
requests the driver places its actors with).  No AWS call anywhere.
"""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path

import pytest
import yaml

from kit.dispatch.cluster import actor_requests
from kit.dispatch.launcher import LauncherError, check_launcher, load_launcher, main, node_types
from kit.images import ImagePin, load_lock, write_lock
from kit.settings.config import load_config

REPO = Path(__file__).resolve().parents[1]
YAML = REPO / "cluster" / "aws-graviton.yaml"
GRAVITON = REPO / "configs" / "cluster-graviton.toml"
CHECK_IMAGE = REPO / "cluster" / "check-image.sh"


def _raw() -> dict:
    return yaml.safe_load(YAML.read_text(encoding="utf-8"))


def _write(tmp_path: Path, doc: dict) -> Path:
    p = tmp_path / "broken.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return p


def test_the_graviton_yaml_passes_rays_own_schema_and_checks():
    import ray.autoscaler
    from ray.autoscaler._private.util import validate_config

    prepared = load_launcher(YAML)
    validate_config(copy.deepcopy(prepared))  # Ray's check, called directly as well: no exception
    schema = json.loads((Path(ray.autoscaler.__file__).parent / "ray-schema.json").read_text(encoding="utf-8"))
    assert set(_raw()) <= set(schema["properties"])  # every top-level key is one Ray's schema defines
    types = {t.name: t for t in node_types(prepared)}
    assert set(types) == {"head", "timing", "build"}
    assert types["head"].head and types["head"].resources == {"CPU": 0.0}
    assert types["timing"].resources == {"CPU": 8.0, "aarch64": 1.0}
    assert types["build"].resources == {"CPU": 16.0, "build": 1.0}
    assert prepared["docker"]["image"].endswith("mkb-kit:arm64")


def test_the_yaml_offers_what_the_graviton_config_asks_for():
    cfg = load_config(GRAVITON)
    requests = actor_requests(cfg)
    assert requests == {"job": {"CPU": 1.0, "aarch64": 0.01}}
    res = check_launcher(YAML, cfg)
    assert res.hosts == {"job": ["timing"]}
    assert res.arch == "aarch64" == cfg.target.arch
    # the labels the config places by are exactly labels some node type of the YAML carries
    labels = {k for r in requests.values() for k in r if k != "CPU"}
    offered = {k for t in res.node_types for k in t.resources if k != "CPU"}
    assert labels == {cfg.dispatch.timing_resource} and labels <= offered
    # what must be filled before `ray up`: the image's registry (twice) and the AMI of every node type
    assert set(res.placeholders) == {"docker.image", "initialization_commands[2]"} | {
        f"available_node_types.{n}.node_config.ImageId" for n in ("head", "timing", "build")}


def test_split_build_and_timing_labels_match_the_yamls_node_types():
    """configs/cluster.toml places build workers by "build" and timing workers by "aarch64": the YAML's build
    and timing node types host them, and the check refuses the config for its x86_64 target."""
    cfg = load_config(REPO / "configs" / "cluster.toml")
    assert actor_requests(cfg) == {"build": {"CPU": 1.0, "build": 0.01}, "time": {"CPU": 0.0, "aarch64": 0.01}}
    types = node_types(load_launcher(YAML))
    for role, want in (("build", {"build"}), ("time", {"timing"})):
        assert {t.name for t in types if t.hosts(actor_requests(cfg)[role]) and not t.head} == want
    with pytest.raises(LauncherError, match=r"are aarch64, but target.arch = 'x86_64'"):
        check_launcher(YAML, cfg)


def test_a_missing_timing_node_type_is_refused_naming_resource_and_field(tmp_path):
    doc = _raw()
    del doc["available_node_types"]["timing"]
    with pytest.raises(LauncherError) as e:
        check_launcher(_write(tmp_path, doc), load_config(GRAVITON))
    msg = str(e.value)
    assert "broken.yaml" in msg and "'aarch64'" in msg and "dispatch.timing_resource" in msg
    assert "build: {'CPU': 16.0, 'build': 1.0}" in msg  # what the file offers instead


def test_a_misspelt_resource_name_is_refused(tmp_path):
    doc = _raw()
    doc["available_node_types"]["timing"]["resources"] = {"CPU": 8, "arm64": 1}
    with pytest.raises(LauncherError, match=r"offers resource 'aarch64'.*timing: \{'CPU': 8.0, 'arm64': 1.0\}"):
        check_launcher(_write(tmp_path, doc), load_config(GRAVITON))


def test_a_labelled_node_type_without_declared_cpus_or_nodes_is_refused(tmp_path):
    doc = _raw()
    doc["available_node_types"]["timing"]["resources"] = {"aarch64": 1}
    with pytest.raises(LauncherError, match="with 1 CPU declared"):
        check_launcher(_write(tmp_path, doc), load_config(GRAVITON))
    doc = _raw()
    doc["available_node_types"]["timing"].update(min_workers=0, max_workers=0)
    with pytest.raises(LauncherError, match=r"timing may start no node \(max_workers = 0\)"):
        check_launcher(_write(tmp_path, doc), load_config(GRAVITON))


def test_rays_schema_and_cross_field_errors_name_file_and_path(tmp_path):
    doc = _raw()
    doc["available_node_types"]["timing"]["resources"]["aarch64"] = "one"
    with pytest.raises(LauncherError, match=r"broken.yaml: fails Ray's cluster config schema at "
                                            r"available_node_types.timing.resources.aarch64: 'one' is not"):
        load_launcher(_write(tmp_path, doc))
    doc = _raw()
    doc["head_node_type"] = "headnode"
    with pytest.raises(LauncherError, match="head_node_type` must be one of `available_node_types"):
        load_launcher(_write(tmp_path, doc))
    doc = _raw()
    doc["workers"] = 3  # not a key of Ray's schema
    with pytest.raises(LauncherError, match="schema at \\(top level\\).*'workers' was unexpected"):
        load_launcher(_write(tmp_path, doc))
    (tmp_path / "bad.yaml").write_text("provider: [unclosed\n")
    with pytest.raises(LauncherError, match="bad.yaml: invalid YAML"):
        load_launcher(tmp_path / "bad.yaml")


def test_x86_instances_and_unchecked_images_are_refused(tmp_path):
    doc = _raw()
    doc["available_node_types"]["timing"]["node_config"]["InstanceType"] = "c7i.2xlarge"
    with pytest.raises(LauncherError, match=r"timing: c7i.2xlarge\) are x86_64, but target.arch = 'aarch64'"):
        check_launcher(_write(tmp_path, doc), load_config(GRAVITON))
    doc = _raw()
    doc["docker"]["run_options"] = []
    with pytest.raises(LauncherError, match="--entrypoint="):
        check_launcher(_write(tmp_path, doc), load_config(GRAVITON))
    doc = _raw()
    doc["initialization_commands"] = [c for c in doc["initialization_commands"] if "check-image.sh" not in c]
    with pytest.raises(LauncherError, match="no initialization command runs cluster/check-image.sh"):
        check_launcher(_write(tmp_path, doc), load_config(GRAVITON))
    doc = _raw()
    doc["cluster_name"] = "renamed"  # the check-image.sh command still reads the old cluster's mount folder
    with pytest.raises(LauncherError, match="under /tmp/ray_tmp_mount/renamed/"):
        check_launcher(_write(tmp_path, doc), load_config(GRAVITON))


def test_the_command_line_refuses_placeholders_unless_allowed(capsys):
    assert main(["check", str(YAML), "--config", str(GRAVITON)]) == 2
    assert "to fill before `ray up`: docker.image" in capsys.readouterr().err
    assert main(["check", str(YAML), "--config", str(GRAVITON), "--allow-placeholders"]) == 0
    out = capsys.readouterr().out
    assert "job workers {'CPU': 1.0, 'aarch64': 0.01} -> node types ['timing']" in out


def _lock_id(lock: Path, arch: str) -> str:
    r = subprocess.run(["bash", str(CHECK_IMAGE), "--lock-id", str(lock), arch], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_check_image_reads_the_same_ids_as_the_kits_lock_parser(tmp_path):
    lock = load_lock(REPO / "images" / "lock.toml")
    assert _lock_id(REPO / "images" / "lock.toml", "amd64") == lock.image["amd64"].id
    assert _lock_id(REPO / "images" / "lock.toml", "arm64") == (lock.image["arm64"].id if "arm64" in lock.image else "")
    arm_id = "sha256:" + "ab" * 32
    other = lock.model_copy(update={"image": {**lock.image, "arm64": ImagePin(tag="mkb-kit:arm64", id=arm_id)}})
    write_lock(other, tmp_path / "lock.toml")
    assert _lock_id(tmp_path / "lock.toml", "arm64") == arm_id == load_lock(tmp_path / "lock.toml", False).image["arm64"].id
    assert _lock_id(tmp_path / "lock.toml", "amd64") == lock.image["amd64"].id


def test_check_image_refuses_a_lock_without_the_arch_before_any_docker_call(tmp_path):
    lock = load_lock(REPO / "images" / "lock.toml")
    write_lock(lock.model_copy(update={"image": {}}), tmp_path / "lock.toml")
    r = subprocess.run(["bash", str(CHECK_IMAGE), "registry.example/mkb-kit:arm64", str(tmp_path / "lock.toml"),
                        "arm64"], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert r.returncode == 2 and "has no [image.arm64] id" in r.stderr
    r = subprocess.run(["bash", str(CHECK_IMAGE), "REPLACE_ME_REGISTRY/mkb-kit:arm64", str(tmp_path / "lock.toml"),
                        "arm64"], capture_output=True, text=True)
    assert r.returncode == 2 and "fill in the registry" in r.stderr


@pytest.mark.slow
def test_a_node_with_the_timing_types_resources_places_the_drivers_worker():
    """A real (embedded) Ray node started with the YAML timing node type's resources schedules an actor made
    with the driver's own options for the Graviton config's workers."""
    import ray

    from kit.dispatch.slots import ray_options

    timing = next(t for t in node_types(load_launcher(YAML)) if t.name == "timing")
    custom = {k: v for k, v in timing.resources.items() if k != "CPU"}
    request = actor_requests(load_config(GRAVITON))["job"]
    if ray.is_initialized():
        ray.shutdown()
    ray.init(address="local", num_cpus=int(timing.resources["CPU"]), resources=custom, include_dashboard=False,
             log_to_driver=False)
    try:
        class Probe:
            def where(self) -> dict:
                return ray.get_runtime_context().get_assigned_resources()

        actor = ray.remote(**ray_options(request))(Probe).remote()
        assigned = ray.get(actor.where.remote(), timeout=120)
        assert assigned == pytest.approx(request)
    finally:
        ray.shutdown()
