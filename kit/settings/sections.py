"""The sections of an evaluation config (``[run]``, ``[tasks]``, ... ``[target]``): every key, its default, its
unit and its checks.  :class:`kit.settings.config.EvalConfig` puts them together and loads them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from kit.host.target import NDK_ABI, NDK_API, Ndk
from kit.settings.base import (
    DEFAULT_CACHE_DIR,
    MNN_TARBALL_URL,
    MNN_TREE_SHA256,
    MNN_VERSION,
    Section,
    fields_error,
)


class RunSection(Section):
    """Where a run writes its records, logs and reports."""

    dir: Path = Path("runs/default")


class TasksSection(Section):
    """Which tasks of the suite to evaluate."""

    dir: Path = Path("tasks")
    split: Literal["train", "test", "all"] = "test"
    #: evaluate only these task ids (empty: every task of the split)
    ids: list[str] = Field(default_factory=list)


class CandidateSource(Section):
    """One method's candidates: a directory ``<task_id>/<sample_id>/<files>`` or a JSONL file.

    JSONL lines hold ``task_id``, ``sample_id`` and either ``response`` (raw LLM text) or ``files``
    (``{"CPUArgMax.cpp": "..."}``).
    """

    method: str = Field(pattern=r"^[A-Za-z0-9_.\-]+$")
    path: Path


class CandidatesSection(Section):
    sources: list[CandidateSource] = Field(default_factory=list)
    #: also evaluate the ``native`` method (the tree's own files; the A/A calibration)
    native: bool = False
    #: largest accepted candidate file, bytes
    max_file_bytes: int = Field(default=256 * 1024, gt=0)


class MnnSection(Section):
    """The MNN tree candidates are compiled into."""

    #: an existing MNN checkout; never modified (a private copy is made in the cache)
    source_dir: Path | None = None
    version: str = MNN_VERSION
    tarball_url: str = MNN_TARBALL_URL
    #: sha256 of the tarball bytes, when known; the unpacked tree is always checked against tree_sha256
    tarball_sha256: str | None = None
    tree_sha256: str = MNN_TREE_SHA256
    #: refuse a source_dir whose content digest differs from tree_sha256 (set false for patched trees)
    check_tree: bool = True
    cache_dir: Path = DEFAULT_CACHE_DIR
    #: ``mnn`` for a real MNN tree, ``fixture`` for the kit's small test engine
    engine: Literal["mnn", "fixture"] = "mnn"
    #: extra CMake arguments for configuring every workspace (and the native build)
    cmake_args: list[str] = Field(default_factory=list)


class BuildSection(Section):
    jobs: int = Field(default=max(1, os.cpu_count() or 1), ge=1)
    #: seconds a build of the whole tree (the native baseline, a fresh workspace's first build: about 13 minutes
    #: for MNN on 2 idle cores from a cold ccache, 20 and more on busy ones) may go without finishing a build step
    #: before it is stopped ("timed out after N s at step k/n (no step finished in M s)"); a build that keeps
    #: finishing steps runs to its end.  0: no such limit, ``timeout_s`` bounds the whole build instead
    stall_timeout_s: float = Field(default=600.0, ge=0)
    #: seconds for a build of the whole tree when ``stall_timeout_s = 0`` (or when ninja's dry run cannot plan
    #: it); with the stall limit on it does not bound that build (a fixed total cannot know how fast a busy
    #: machine builds: 1200 s reach 505 of 750 MNN steps on one).  Part of the config digest, so run directories
    #: made with it resume
    timeout_s: float = Field(default=1200.0, gt=0)
    #: seconds for a candidate's build (its files and what depends on them: seconds, measured 1.5-4.3 s for a
    #: swapped kernel; a compile-time bomb would otherwise hold a worker for the native build's 20 minutes)
    candidate_timeout_s: float = Field(default=300.0, gt=0)
    ccache: bool = True


class VerifySection(Section):
    #: seeded input sets per task (>= 5 for scoring runs), run with ``timing.threads`` threads
    trials: int = Field(default=5, ge=1)
    seed: int = 0
    #: further thread counts to verify at, so that a kernel whose multi-threaded split is wrong fails; each runs
    #: the first ``extra_trials`` seeds (a count equal to ``timing.threads`` is skipped)
    extra_threads: list[Annotated[int, Field(ge=1)]] = Field(default_factory=lambda: [4])
    extra_trials: int = Field(default=2, ge=1)
    convert_timeout_s: float = Field(default=120.0, gt=0)
    run_timeout_s: float = Field(default=60.0, gt=0)
    #: address-space limit (RLIMIT_AS) of the converter and runner processes that execute candidate code, MiB
    memory_limit_mb: int = Field(default=8192, ge=256)


#: the timing keys of adaptive rounds (not in the digest of a config with the fixed ``rounds``)
ADAPTIVE_KEYS = frozenset({"rounds_min", "rounds_step", "rounds_max", "stop_width"})


def stop_thresholds(fast_p: list[float]) -> tuple[float, ...]:
    """The speedup thresholds an adaptive timing's interval must not straddle to stop early: 0, 0.5, 1.0, 1.5,
    2.0 and ``fast_p`` (``report.fast_p``), ascending."""
    return tuple(sorted({0.0, 0.5, 1.0, 1.5, 2.0, *map(float, fast_p)}))


class TimingSection(Section):
    enabled: bool = True
    threads: int = Field(default=1, ge=1)
    #: MNN BackendConfig precision; ``high`` is fp32 on CPU
    precision: Literal["high", "normal", "low"] = "high"
    #: untimed forward passes at the start of every run (one run = one runner process)
    warmup: int = Field(default=10, ge=0)
    #: timed iterations per round and side
    iterations: int = Field(default=30, ge=1)
    #: interleaved rounds (N C, C N, N C, ...; the speedup's interval is over rounds) run adaptively: a look after
    #: ``rounds_min`` rounds and every ``rounds_step`` more, up to ``rounds_max``; the timing stops at a look whose
    #: repeated confidence interval decides every fast_p threshold (0, 0.5, 1.0, 1.5, 2.0 and ``report.fast_p``)
    #: or is narrower than ``stop_width`` (relative to the speedup) (docs/scoring.md).  10 x 30 keeps the 300
    #: timed iterations per side of the former 3 x 100
    rounds_min: int = Field(default=6, ge=2)
    rounds_step: int = Field(default=4, ge=1)
    rounds_max: int = Field(default=10, ge=2)
    stop_width: float = Field(default=0.05, gt=0)
    #: the fixed protocol of this many rounds (at least 2): sets ``rounds_min`` and ``rounds_max`` to it, over
    #: any value they are given (the only rounds setting of configs before adaptive rounds)
    rounds: int | None = Field(default=None, ge=2)
    #: confidence level of the speedup's interval (Student t over the rounds' paired log ratios)
    confidence: float = Field(default=0.95, gt=0.5, lt=1.0)
    #: CPU cores both sides' runners are pinned to (``threads`` of them); empty: the last ``threads`` cores this
    #: process may run on
    cores: list[int] = Field(default_factory=list)
    #: a native op time (ms) below this is too short to time here: the record is flagged untimeable, its
    #: speedup never scored.  The floor of the per-op callbacks measured on MNN 3.2.2 here (a 1-element Add,
    #: BinaryOp): 0.29 us since the runner reads its clock by the system call (0.06 us through libc), i.e. about
    #: 6 % of 5 us; the shortest native op time of the test split was 34 us
    min_native_ms: float = Field(default=0.005, ge=0)
    #: a speedup above this factor is flagged implausible in the record and the report, never silently scored
    implausible_speedup: float = Field(default=10.0, gt=1.0)
    timeout_s: float = Field(default=300.0, gt=0)
    #: timed forwards per run, of those on fresh inputs, that the runner picks at random after each forward and
    #: writes out (with the pool indices of their inputs, which the kit rebuilds from its own sets), for the kit
    #: to compare with ONNX Runtime (docs/untrusted.md)
    checked_forwards: int = Field(default=2, ge=0)

    def digest_payload(self, fast_p: list[float]) -> dict[str, Any]:
        """The section as the config's digest covers it: with ``rounds`` (fixed) exactly as before adaptive
        rounds (so the digests of those configs stay what they were); adaptive, without ``rounds`` and with the
        thresholds the timing stops on (``stop_thresholds``: 0, 0.5, 1.0, 1.5, 2.0 and ``fast_p``)."""
        body = self.model_dump(mode="json")
        if self.rounds is not None:
            return {k: v for k, v in body.items() if k not in ADAPTIVE_KEYS}
        del body["rounds"]
        return {**body, "stop_thresholds": list(stop_thresholds(fast_p))}

    @model_validator(mode="before")
    @classmethod
    def _fixed_rounds(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("rounds") is not None:
            return {**data, "rounds_min": data["rounds"], "rounds_max": data["rounds"]}
        return data

    @model_validator(mode="after")
    def _rounds_plan(self) -> TimingSection:
        if self.rounds_min > self.rounds_max or (self.rounds_min < self.rounds_max and self.rounds_min < 3):
            raise fields_error(("rounds_min", "rounds_max"),
                               f"timing.rounds_min = {self.rounds_min} must be at most timing.rounds_max = "
                               f"{self.rounds_max}, and at least 3 when below it (an adaptive timing's first "
                               f"look needs a spread over rounds)")
        return self

    @model_validator(mode="after")
    def _cores_match_threads(self) -> TimingSection:
        if self.cores and (len(self.cores) != self.threads or len(set(self.cores)) != len(self.cores)
                           or min(self.cores) < 0):
            raise fields_error(("cores", "threads"),
                                f"timing.cores {self.cores} must name timing.threads = {self.threads} distinct "
                                f"non-negative core numbers (or be empty: chosen automatically)")
        return self


class SandboxSection(Section):
    """How commands that run or compile candidate code are confined (:mod:`kit.host.sandbox`)."""

    #: ``bwrap``: bubblewrap required; ``auto``: bubblewrap where it works, else rlimits only (logged, and every
    #: record says ``sandboxed = false``); ``none``: rlimits only
    mode: Literal["auto", "bwrap", "none"] = "auto"
    #: address space of a compiler process (MiB; a template bomb is stopped here)
    build_memory_mb: int = Field(default=4096, ge=256)
    #: largest file a confined command may write (MiB)
    file_mb: int = Field(default=1024, ge=1)
    open_files: int = Field(default=1024, ge=16)
    #: processes a confined command may add to those the kit's user runs (a fork bomb stops here)
    processes: int = Field(default=256, ge=8)
    #: CPU seconds of one runner or converter process
    run_cpu_s: int = Field(default=600, ge=1)
    #: size of a sandboxed command's private /tmp (MiB)
    tmp_mb: int = Field(default=256, ge=1)
    #: size of a sandboxed runner's output directory (MiB): a tmpfs in the sandbox, copied out after the runner
    #: exits; a run that fills it is ``runtime_crash``, ``limit``, and nothing of it lands on the host disk
    out_mb: int = Field(default=1024, ge=1)


#: resource names Ray defines itself (never a node label)
RAY_PREDEFINED_RESOURCES = frozenset({"CPU", "GPU", "memory", "object_store_memory"})


class DispatchSection(Section):
    #: ``ray``: Ray actors (an embedded local Ray unless ``address`` is set); ``processes``: the same on this
    #: host only; ``serial``: one worker in this process, no Ray
    mode: Literal["serial", "processes", "ray"] = "ray"
    workers: int = Field(default=1, ge=1)
    #: Ray cluster address (``auto``, ``host:6379``, or ``ray://host:10001`` through Ray Client, which needs the
    #: ``client`` extra); None starts an embedded local Ray
    address: str | None = None
    #: custom Ray resource that marks timing nodes (e.g. ``aarch64``); None: any node
    timing_resource: str | None = None
    #: custom Ray resource that marks build nodes.  None: every worker builds, verifies and times on its own
    #: node (a timing_resource node).  Set: ``workers`` build workers on these nodes build and verify, and
    #: one timing worker per ``timing_resource`` node times what they ship through Ray's object store (for
    #: ``target.arch = "aarch64"`` the build nodes may be x86_64, cross-building: docs/cluster.md)
    build_resource: str | None = None
    max_retries: int = Field(default=2, ge=0)

    @field_validator("timing_resource", "build_resource")
    @classmethod
    def _custom_resource(cls, v: str | None) -> str | None:
        if v is not None and (not v or v in RAY_PREDEFINED_RESOURCES or v.startswith(("node:", "accelerator_type:"))):
            raise ValueError(f"{v!r} is not a custom resource name: Ray predefines CPU, GPU, memory, "
                             "object_store_memory, node:* and accelerator_type:*; start the nodes with e.g. "
                             "--resources='{\"aarch64\": 1}' and name that")
        return v

    @field_validator("address")
    @classmethod
    def _address_form(cls, v: str | None) -> str | None:
        if v is None or v == "auto":
            return v
        host, sep, port = v.removeprefix("ray://").rpartition(":")
        if not sep or not host or "/" in host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{v!r}: give 'auto', 'ray://HOST:PORT' (Ray Client, usually port 10001; needs "
                             "the kit's `client` extra) or 'HOST:PORT' (the head's GCS port)")
        return v

    @model_validator(mode="after")
    def _split_needs_timing_nodes(self) -> DispatchSection:
        if self.build_resource is not None and self.timing_resource is None:
            raise fields_error(("build_resource", "timing_resource"),
                                "dispatch.build_resource is set but dispatch.timing_resource is not: "
                                "name the resource that marks the timing nodes")
        if self.build_resource is not None and self.mode != "ray":
            raise fields_error(("build_resource", "mode"),
                                "dispatch.build_resource needs dispatch.mode = \"ray\" (serial and processes runs "
                                "have one node without custom resources)")
        return self


class TargetSection(Section):
    """What jobs are built for (:mod:`kit.host.target`): ``x86_64`` (this host: native builds, timed here) or
    ``aarch64`` (cross-built on an x86_64 node, linked statically, verified under qemu, and timed there under
    qemu — recorded, never scored — or shipped to Ray timing nodes of ``dispatch.timing_resource``, or to an adb
    device; built natively on an aarch64 node)."""

    arch: Literal["x86_64", "aarch64"] = "x86_64"
    #: compile ARMv8.2 half-precision arithmetic in (MNN's ``MNN_ARM82``; aarch64 only).  Off by default: the
    #: runs are fp32 (``timing.precision = "high"``), and the fp16 kernels add about 40 % of the cross build's
    #: steps
    fp16: bool = False
    #: an Android NDK's root folder: a cross build then uses the NDK's CMake toolchain file and clang (the
    #: paper's set-up, :class:`kit.host.target.Ndk`) instead of Debian's cross compilers; None: Debian's
    ndk: Path | None = None
    #: the Android API level of an NDK build (its ``aarch64-linux-android<API>-clang++``; MNN's own 64-bit
    #: Android script uses 21)
    android_api: int = Field(default=NDK_API, ge=21)
    #: the Android ABI of an NDK build (arm64-v8a: the only 64-bit ARM one)
    android_abi: Literal["arm64-v8a"] = NDK_ABI

    @model_validator(mode="after")
    def _fp16_needs_arm(self) -> TargetSection:
        if self.fp16 and self.arch != "aarch64":
            raise fields_error(("fp16", "arch"), f"target.fp16 = true needs target.arch = \"aarch64\" (ARMv8.2 "
                                f"half-precision arithmetic), not {self.arch!r}")
        return self

    @model_validator(mode="after")
    def _ndk_usable(self) -> TargetSection:
        ndk = self.ndk_info()
        if ndk is None:
            return self
        if self.arch != "aarch64":
            raise fields_error(("ndk", "arch"), f"target.ndk needs target.arch = \"aarch64\" (the NDK's "
                               f"{self.android_abi} toolchain), not {self.arch!r}")
        if (problem := ndk.problem()) is not None:
            fields = ("ndk", "android_api") if "clang++" in problem else ("ndk",)
            raise fields_error(fields, f"target.ndk: {problem}")
        return self

    def ndk_info(self) -> Ndk | None:
        """The :class:`kit.host.target.Ndk` of ``ndk`` (None without one)."""
        if self.ndk is None:
            return None
        return Ndk(str(self.ndk.expanduser().absolute()), self.android_api, self.android_abi)


class ReportSection(Section):
    #: thresholds p of fast_p (paper §5.1)
    fast_p: list[float] = Field(default_factory=lambda: [0.0, 0.5, 1.0, 1.5, 2.0])
    #: at the end of ``mkb eval``: merge the shards into results.parquet and write ``<run.dir>/report/``
    enabled: bool = True
    #: score fast_p on tasks whose pinned native build the audit marked ``native_incorrect`` (their speedups are
    #: over a native kernel that does not compute the op; kit.suite.nativemarks); false: CSR and FCR only
    score_native_incorrect: bool = False


