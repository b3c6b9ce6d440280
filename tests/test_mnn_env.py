"""The real tree's variable (MKB_MNN__SOURCE_DIR, set for the mnn tests: CI sets it for the whole suite) reaches
only the tests marked mnn: in the environment a config file's keys are overridden, so a fixture-engine config
would otherwise name the real tree (tests/conftest.py, pytest_runtest_protocol)."""

from __future__ import annotations

import os

import pytest
from conftest import mnn_source_dir
from conftest_fixture import fixture_config_text

from kit.settings.config import load_config


def test_a_fixture_config_keeps_its_own_tree(tmp_path):
    assert "MKB_MNN__SOURCE_DIR" not in os.environ
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(fixture_config_text(tmp_path / "run", source_dir=tmp_path / "engine", cache_dir=tmp_path / "c"))
    assert load_config(cfg).mnn.source_dir == tmp_path / "engine"


@pytest.mark.mnn
def test_an_mnn_test_sees_the_real_tree():
    assert os.environ["MKB_MNN__SOURCE_DIR"] == str(mnn_source_dir())
