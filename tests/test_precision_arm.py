"""Precision fairness on ARM: ``timing.precision = "low"`` on an aarch64 target is refused (kit.settings.config's
``_check_precision``), and the fact the refusal rests on is shown under qemu: an ARMv8.2 CPU model (Cortex-A76,
and qemu's default ``max``, which the kit's emulated runs get) reports the FP16 arithmetic features (FPHP, ASIMDHP)
that make MNN's CPU runtime pick its half-precision backend for precision Low, where an ARMv8.0 model
(Cortex-A53) does not."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kit.settings.config import ConfigError, load_config

PROBE = Path(__file__).parent / "armprobe" / "fp16arith.c"


def _config(tmp_path: Path, arch: str, precision: str, fp16: bool = False) -> Path:
    p = tmp_path / f"{arch}-{precision}-{fp16}.toml"
    p.write_text(f"[target]\narch = '{arch}'\nfp16 = {str(fp16).lower()}\n[timing]\nprecision = '{precision}'\n")
    return p


def test_low_precision_on_aarch64_is_refused_with_the_reason(tmp_path):
    for fp16 in (False, True):
        with pytest.raises(ConfigError) as ei:
            load_config(_config(tmp_path, "aarch64", "low", fp16))
        msg = str(ei.value)
        assert "timing.precision" in msg and "target.arch" in msg and "aarch64" in msg
        assert "Arm82Backend" in msg and "fp16" in msg and "watermark" in msg
    assert load_config(_config(tmp_path, "aarch64", "high", True)).timing.precision == "high"
    assert load_config(_config(tmp_path, "aarch64", "normal")).timing.precision == "normal"
    assert load_config(_config(tmp_path, "x86_64", "low")).timing.precision == "low"


def test_low_precision_refused_from_a_cli_override(tmp_path):
    with pytest.raises(ConfigError, match="timing.precision"):
        load_config(_config(tmp_path, "aarch64", "high"), ["--timing.precision", "low"])


def _probe(binary: Path, cpu: str | None) -> str:
    cmd = ["qemu-aarch64-static", *(["-cpu", cpu] if cpu else []), str(binary)]
    return subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=60).stdout.strip()


def test_armv82_cpu_model_under_qemu_has_the_fp16_arithmetic_the_refusal_rests_on(tmp_path):
    if shutil.which("aarch64-linux-gnu-gcc") is None or shutil.which("qemu-aarch64-static") is None:
        pytest.skip("needs aarch64-linux-gnu-gcc and qemu-aarch64-static (apt-get install gcc-aarch64-linux-gnu "
                    "qemu-user-static)")
    binary = tmp_path / "fp16arith"
    subprocess.run(["aarch64-linux-gnu-gcc", "-O1", "-static", "-o", str(binary), str(PROBE)], check=True,
                   capture_output=True, timeout=120)
    assert _probe(binary, "cortex-a76") == "fphp=1 asimdhp=1"  # ARMv8.2-A with FP16: a phone's big core
    assert _probe(binary, None) == "fphp=1 asimdhp=1"  # qemu's default (max): what the kit's emulated runs see
    assert _probe(binary, "cortex-a53") == "fphp=0 asimdhp=0"  # ARMv8.0-A: MNN would stay on fp32 there
    with pytest.raises(ConfigError, match="asimdhp"):
        load_config(_config(tmp_path, "aarch64", "low", True))
    assert load_config(_config(tmp_path, "aarch64", "high", True)).target.fp16
