"""kit.host.shipping (bundles shipped between nodes) and the timing half of a split job (kit.job.pipeline.time_job)
on bad bundles: another architecture or another native build is a harness_error, never a candidate's fault."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kit.host.machine import host_arch
from kit.host.shipping import ArtefactError, Bundle, elf_arch, elf_needed, pack, runtime_libs
from kit.host.target import make_target
from kit.job.artefacts import BuildHalf, Built
from kit.job.pipeline import time_job
from kit.job.record import Job
from kit.job.timing_worker import TimingWorker
from kit.results.outcomes import BuildOutcome, Outcome, Where
from kit.results.records import ErrorKind, Status
from kit.settings.config import EvalConfig
from kit.suite.tasks import load_suite

FIXTURE_TASKS = Path(__file__).resolve().parent / "fixture_engine" / "tasks"


def _elf_header(machine: int, little: bool = True) -> bytes:
    """A 64-byte ELF64 header with only the fields elf_arch reads set (magic, class, data, e_machine)."""
    h = bytearray(64)
    h[:4] = b"\x7fELF"
    h[4] = 2  # ELFCLASS64
    h[5] = 1 if little else 2
    h[18:20] = machine.to_bytes(2, "little" if little else "big")
    return bytes(h)


def test_elf_arch_of_this_interpreter_is_the_host_arch():
    exe = Path(sys.executable).resolve()
    assert elf_arch(exe.read_bytes()[:64], str(exe)) == host_arch()


@pytest.mark.parametrize(("machine", "little", "arch"), [
    (0xB7, True, "aarch64"), (0x3E, True, "x86_64"), (0x28, True, "armv7l"), (0xF3, True, "riscv64"),
    (0xB7, False, "aarch64"), (0x15, True, "EM_PPC64"), (0x1234, True, "elf-machine-0x1234"),
])
def test_elf_arch_reads_e_machine(machine, little, arch):
    assert elf_arch(_elf_header(machine, little)) == arch


def test_elf_arch_rejects_non_elf():
    with pytest.raises(ArtefactError, match="model.mnn: not an ELF file"):
        elf_arch(b"\x00" * 64, "model.mnn")


def test_pack_write_round_trip_and_modes(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "libX.so").write_bytes(Path(sys.executable).resolve().read_bytes()[:4096])
    (src / "notes.txt").write_text("hello")
    (src / "link.so").symlink_to(src / "libX.so")
    b = pack({f"lib/{p.name}": p for p in src.iterdir()})
    assert set(b.files) == {"lib/libX.so", "lib/notes.txt", "lib/link.so"} and b.arch == host_arch()
    assert b.size_bytes == 4096 * 2 + 5
    out = b.write(tmp_path / "out")
    assert (out / "lib" / "notes.txt").read_text() == "hello"
    assert (out / "lib" / "link.so").read_bytes() == (src / "libX.so").read_bytes()  # symlink followed
    assert (out / "lib" / "libX.so").stat().st_mode & 0o777 == 0o755
    assert (out / "lib" / "notes.txt").stat().st_mode & 0o777 == 0o644
    b.check_runs_here("this bundle")  # same arch: no error


def test_runtime_libs_is_the_needed_closure_within_the_lib_dir(tmp_path):
    """A real link: an executable needing libA.so, which needs libB.so; libC.so in the same directory is
    not needed and not shipped; libc etc. are outside the directory."""
    import shutil
    import subprocess

    if not shutil.which("gcc"):
        pytest.skip("needs gcc")
    lib = tmp_path / "lib"
    lib.mkdir()
    (tmp_path / "b.c").write_text("int b(void){return 2;}\n")
    (tmp_path / "a.c").write_text("int b(void); int a(void){return b()+1;}\n")
    (tmp_path / "c.c").write_text("int c(void){return 3;}\n")
    (tmp_path / "m.c").write_text("int a(void); int main(void){return a()==3?0:1;}\n")
    def cc(*args: str) -> None:
        subprocess.run(["gcc", *args], cwd=tmp_path, check=True)
    cc("-shared", "-fPIC", "b.c", "-o", "lib/libB.so")
    cc("-shared", "-fPIC", "c.c", "-o", "lib/libC.so")
    cc("-shared", "-fPIC", "a.c", "-Llib", "-lB", "-o", "lib/libA.so")
    cc("m.c", "-Llib", "-lA", "-Wl,-rpath-link,lib", "-o", "m")
    assert "libA.so" in elf_needed(tmp_path / "m")
    assert runtime_libs(tmp_path / "m", lib) == {"lib/libA.so": lib / "libA.so", "lib/libB.so": lib / "libB.so"}
    with pytest.raises(ArtefactError, match="a.c: not an ELF file"):
        elf_needed(tmp_path / "a.c")


def test_pack_refuses_mixed_architectures(tmp_path):
    (tmp_path / "a.so").write_bytes(_elf_header(0x3E))
    (tmp_path / "b.so").write_bytes(_elf_header(0xB7))
    with pytest.raises(ArtefactError, match="mixes architectures"):
        pack({p.name: p for p in tmp_path.iterdir()})


def test_bundle_paths_cannot_leave_the_destination(tmp_path):
    for bad in ("../escape.so", "/abs/escape.so", "lib/../../escape.so"):
        with pytest.raises(ArtefactError, match="leaves the destination"):
            Bundle({bad: b"x"}).write(tmp_path / "dest")
    assert not (tmp_path / "escape.so").exists()


#: ELF e_machine numbers (System V ABI)
EM = {"x86_64": 62, "aarch64": 183}


def _other_arch() -> str:
    return "aarch64" if host_arch() != "aarch64" else "x86_64"


def test_foreign_arch_bundle_does_not_run_here():
    other = _other_arch()
    with pytest.raises(ArtefactError, match=f"lib/libMNN.so was built for {other}.*runs {host_arch()} natively"):
        Bundle({"lib/libMNN.so": _elf_header(EM[other])}).check_runs_here("the candidate libraries")


def test_every_file_is_checked_by_its_own_header_not_by_the_bundles_word():
    """The sender's ``arch`` is not trusted: one foreign file among right ones is named, with both machines."""
    files = {"lib/libMNN.so": _elf_header(EM["aarch64"]), "bin/mkb_runner": _elf_header(EM["x86_64"]),
             "model.mnn": b"not machine code"}
    with pytest.raises(ArtefactError) as e:
        Bundle(files, arch="aarch64").check_machine("aarch64", "shipped", "under qemu-aarch64-static")
    msg = str(e.value)
    assert "bin/mkb_runner was built for x86_64 (ELF machine EM_X86_64)" in msg
    assert "runs aarch64 under qemu-aarch64-static (ELF machine EM_AARCH64)" in msg
    Bundle({"lib/libMNN.so": _elf_header(EM["aarch64"]), "model.mnn": b"x"}).check_machine("aarch64", "shipped")


@pytest.mark.parametrize("rel", ["bin/mkb_runner", "lib/libMNN.so", "lib/libMNN.so.3"])
def test_a_non_elf_executable_or_library_is_refused(rel):
    with pytest.raises(ArtefactError, match=f"{rel} is not an ELF file"):
        Bundle({rel: b"#!/bin/sh\necho hi\n"}).check_machine("x86_64", "shipped")


def _job() -> Job:
    task = load_suite(FIXTURE_TASKS, "all", ["fx_argmax"])[0]
    return Job(task, "m", "s0", "ab" * 32, "cfgdigest", files={})


def _built(libs: Bundle, native_key: str = "k1") -> Built:
    half = BuildHalf(Where(worker="nabc.w0"), Outcome(build=BuildOutcome(build_s=1.5)), wall_s=2.0)
    return Built(half=half, libs=libs, model=b"model", native_model=b"native", native_key=native_key,
                 built_by="nabc.w0")


def _timer(tmp_path: Path) -> TimingWorker:
    cfg = EvalConfig(mnn={"cache_dir": tmp_path / "cache", "engine": "fixture"})
    return TimingWorker(cfg, tmp_path / "shipped", "k1", name="ndef.t0")


def test_time_job_with_another_native_build_is_a_harness_error(tmp_path):
    rec = time_job(_job(), _built(Bundle({}), native_key="k2"), _timer(tmp_path))
    assert rec.status is Status.HARNESS_ERROR and rec.error_kind is ErrorKind.ARTEFACT
    assert "built against native k2" in rec.error_message and "ndef.t0 has k1" in rec.error_message
    # what the build node measured is kept, and the record names both workers
    assert rec.build_s == 1.5 and rec.worker == "nabc.w0" and rec.timing_worker == "ndef.t0"
    assert rec.wall_s is not None and rec.wall_s >= 2.0


def test_time_job_with_foreign_arch_libraries_is_a_harness_error(tmp_path):
    other = _other_arch()
    timer = _timer(tmp_path)
    timer.target = make_target(host_arch(), host_arch=host_arch())
    rec = time_job(_job(), _built(Bundle({"lib/libMNN.so": _elf_header(EM[other])}, arch=other)), timer)
    assert rec.status is Status.HARNESS_ERROR and rec.error_kind is ErrorKind.ARTEFACT
    assert f"lib/libMNN.so was built for {other}" in rec.error_message
    assert "Traceback" not in rec.error_message  # a cluster fault in words, not a crash of the kit
