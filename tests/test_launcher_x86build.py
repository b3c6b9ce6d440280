"""cluster/aws-graviton-x86build.yaml: x86_64 build nodes (amd64 image, cross-building) and Graviton timing nodes
(arm64 image), each node type with its own image; checked offline through Ray's own prepare/validate and the
kit's node-type, architecture and image checks, broken variants refused by field.  No AWS call."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from kit.dispatch.cluster import actor_requests
from kit.dispatch.launcher import LauncherError, check_launcher, load_launcher, main, node_types
from kit.dispatch.nodeimages import image_of, init_commands_of
from kit.settings.config import load_config

REPO = Path(__file__).resolve().parents[1]
YAML = REPO / "cluster" / "aws-graviton-x86build.yaml"
CFG = REPO / "configs" / "cluster-graviton-x86build.toml"
AMD64, ARM64 = "REPLACE_ME_REGISTRY/mkb-kit:amd64", "REPLACE_ME_REGISTRY/mkb-kit:arm64"


def _raw() -> dict:
    return yaml.safe_load(YAML.read_text(encoding="utf-8"))


def _check(tmp_path: Path, doc: dict, cfg: Path = CFG):
    p = tmp_path / "broken.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return check_launcher(p, load_config(cfg))


def test_rays_own_checks_pass_and_each_node_type_has_its_image():
    from ray.autoscaler._private.util import validate_config

    prepared = load_launcher(YAML)
    validate_config(copy.deepcopy(prepared))
    types = {t.name: t for t in node_types(prepared)}
    assert types["build"].resources == {"CPU": 16.0, "build": 1.0} and types["build"].instance_type == "c7i.4xlarge"
    assert types["timing"].resources == {"CPU": 8.0, "aarch64": 1.0} and types["timing"].instance_type == "c7g.2xlarge"
    # Ray's own rules as the kit reads them: a node type's worker_image and initialization_commands win
    assert image_of(prepared, "timing") == (ARM64, "available_node_types.timing.docker.worker_image")
    assert image_of(prepared, "build") == (AMD64, "docker.image") and image_of(prepared, "head")[0] == AMD64
    assert init_commands_of(prepared, "timing")[1] == "available_node_types.timing.initialization_commands"
    assert init_commands_of(prepared, "build")[1] == "initialization_commands"


def test_x86_build_nodes_cross_build_and_arm_nodes_time():
    cfg = load_config(CFG)
    assert actor_requests(cfg) == {"build": {"CPU": 1.0, "build": 0.01}, "time": {"CPU": 0.0, "aarch64": 0.01}}
    res = check_launcher(YAML, cfg)
    assert res.hosts == {"build": ["build"], "time": ["timing"]}
    assert res.arch == "aarch64" and res.arches == {"head": "x86_64", "build": "x86_64", "timing": "aarch64"}
    assert res.images == {"head": AMD64, "build": AMD64, "timing": ARM64}
    assert any("['build'] cross-build for aarch64" in n for n in res.notes)


def test_the_command_line_lists_each_node_types_image(capsys):
    assert main(["check", str(YAML), "--config", str(CFG), "--allow-placeholders"]) == 0
    out = capsys.readouterr().out
    assert f"node type timing (aarch64) runs {ARM64}" in out and f"node type build (x86_64) runs {AMD64}" in out
    assert main(["check", str(YAML), "--config", str(CFG)]) == 2  # the registry and the AMIs are still to fill


def test_a_timing_node_type_without_its_own_image_is_refused_by_field(tmp_path):
    doc = _raw()
    del doc["available_node_types"]["timing"]["docker"]  # it would run the amd64 image its commands do not check
    with pytest.raises(LauncherError, match=r"image of node type 'timing', '.*amd64' \(docker.image\): "
                                            r"available_node_types.timing.initialization_commands must check it"):
        _check(tmp_path, doc)


def test_a_timing_node_type_using_the_global_commands_is_refused_by_field(tmp_path):
    doc = _raw()
    del doc["available_node_types"]["timing"]["initialization_commands"]  # they check the amd64 image only
    with pytest.raises(LauncherError, match=r"node type 'timing', '.*arm64' \(available_node_types.timing.docker."
                                            r"worker_image\): initialization_commands must check it"):
        _check(tmp_path, doc)


def test_an_image_checked_as_another_architecture_is_refused(tmp_path):
    doc = _raw()
    cmds = doc["available_node_types"]["timing"]["initialization_commands"]
    cmds[-1] = cmds[-1].replace(" arm64", " amd64").replace("mkb-kit:amd64", "mkb-kit:arm64")
    with pytest.raises(LauncherError, match=r"node type 'timing' is aarch64 but available_node_types.timing."
                                            r"initialization_commands checks its image .* as amd64"):
        _check(tmp_path, doc)
    doc = _raw()
    doc["available_node_types"]["build"]["node_config"]["InstanceType"] = "c7g.4xlarge"  # arm, amd64 image
    with pytest.raises(LauncherError, match=r"node type 'build' is aarch64 but initialization_commands checks"):
        _check(tmp_path, doc)


def test_x86_timing_nodes_and_builds_the_kit_cannot_do_are_refused(tmp_path):
    doc = _raw()
    doc["available_node_types"]["timing"]["node_config"]["InstanceType"] = "c7i.2xlarge"
    with pytest.raises(LauncherError, match=r"\(timing: c7i.2xlarge\) are x86_64, but target.arch = 'aarch64'.*"
                                            r"never scored"):
        _check(tmp_path, doc)
    # an x86_64 target timed on x86 nodes, built on ARM ones: the kit cross-builds only x86_64 -> aarch64
    doc = _raw()
    timing, build = doc["available_node_types"]["timing"], doc["available_node_types"]["build"]
    timing["node_config"]["InstanceType"] = "c7i.2xlarge"
    del timing["docker"], timing["initialization_commands"]
    build["node_config"]["InstanceType"] = "c7g.4xlarge"
    with pytest.raises(LauncherError, match=r"build node type 'build' \(c7g.4xlarge\) is aarch64 and cannot build "
                                            r"for target.arch = 'x86_64'.*available_node_types.build.node_config"):
        _check(tmp_path, doc, REPO / "configs" / "cluster.toml")
